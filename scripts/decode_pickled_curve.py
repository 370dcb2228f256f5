"""Read a per-epoch curve from a pickle without unpickling it: the file is walked opcode by
opcode (pickletools.genops, which executes nothing), it must be a list of numpy float64
scalars (only the globals numpy's scalar and dtype are admitted), and the 8-byte payloads are
decoded as little-endian doubles. Anything else in the file is refused.

    python scripts/decode_pickled_curve.py test_accu_lst.pkl --source "JINKEHE/BayesByBackprop@6b8835e:results/mnist/bayes1/test_accu_lst.pkl" \\
        --output results/all-images/jinkehe-bayes1-test-accuracy.json
"""
import argparse
import hashlib
import json
import pickletools
import struct
import sys

ADMITTED_GLOBALS = {"numpy.core.multiarray scalar", "numpy._core.multiarray scalar", "numpy dtype"}
ADMITTED_OPCODES = {"PROTO", "EMPTY_LIST", "BINPUT", "LONG_BINPUT", "MARK", "GLOBAL",
                    "BINUNICODE", "BININT1", "BININT", "TUPLE3", "TUPLE2", "TUPLE", "REDUCE",
                    "NONE", "BUILD", "SHORT_BINBYTES", "BINGET", "LONG_BINGET", "APPENDS",
                    "APPEND", "STOP", "FRAME", "MEMOIZE", "SHORT_BINUNICODE", "NEWFALSE",
                    "NEWTRUE"}


def decode(payload, source):
    values = []
    for opcode, argument, _ in pickletools.genops(payload):
        if opcode.name not in ADMITTED_OPCODES:
            raise ValueError(f"{source}: opcode {opcode.name} is not one of a list of numpy floats")
        if opcode.name == "GLOBAL" and argument not in ADMITTED_GLOBALS:
            raise ValueError(f"{source}: global {argument!r} is not numpy's scalar or dtype")
        if opcode.name in ("BINUNICODE", "SHORT_BINUNICODE") and argument not in ("f8", "<"):
            raise ValueError(f"{source}: dtype {argument!r} is not float64")
        if opcode.name == "SHORT_BINBYTES":
            if len(argument) != 8:
                raise ValueError(f"{source}: a scalar of {len(argument)} bytes is not a float64")
            values.append(struct.unpack("<d", argument)[0])
    return values


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pickle")
    parser.add_argument("--source", required=True, help="where the file came from")
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    payload = open(args.pickle, "rb").read()
    try:
        values = decode(payload, args.pickle)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    record = {"source": args.source, "sha256": hashlib.sha256(payload).hexdigest(),
              "decoded_by": "scripts/decode_pickled_curve.py (pickletools.genops; nothing executed)",
              "values": values}
    with open(args.output, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")
    print(f"{len(values)} values; first {values[:3]}, last {values[-3:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
