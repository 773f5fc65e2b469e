"""The op table (printed by dump_op_table) against a current onnx's schemas, for every opset through the table's
known_through: each op's versions are exactly its schemas' since_versions, every attribute of an implemented
version is implemented or refused, and a restricted attribute's default is among its values. The C++ sweep
(op_table_test.cpp) covers opsets 1 to 17 with libonnx 1.12; this covers the rest.

Exits 77 (ctest's skip) with a message when no onnx that knows those opsets is importable."""
import json
import subprocess
import sys


def main():
    table = json.loads(subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout)
    try:
        import onnx
        import onnx.defs
        import onnx.helper
    except ImportError:
        print("SKIPPED: no onnx module in %s; install a current onnx (pip install onnx) to check opsets 18 and later"
              % sys.executable)
        return 77
    known = table["known_through"]
    if onnx.defs.onnx_opset_version() < known:
        print("SKIPPED: onnx %s knows opsets up to %d, the table is written through %d"
              % (onnx.__version__, onnx.defs.onnx_opset_version(), known))
        return 77
    problems = []
    for spec in table["ops"]:
        op = spec["op"]
        versions = sorted({onnx.defs.get_schema(op, o).since_version for o in range(1, known + 1)
                           if has_schema(op, o)})
        if versions != spec["versions"]:
            problems.append("%s: table versions %s, onnx %s %s" % (op, spec["versions"], onnx.__version__, versions))
        for v in versions:
            if v < spec["first_implemented"] or (spec["last_implemented"] and v > spec["last_implemented"]):
                continue
            for name, attr in onnx.defs.get_schema(op, v).attributes.items():
                implemented = name in spec["attributes"]
                if implemented == (name in spec["refused"]):
                    problems.append("%s-%d: attribute %s is %s" % (op, v, name,
                                    "both implemented and refused" if implemented else "neither implemented nor refused"))
                    continue
                values = spec["attributes"].get(name)
                default = onnx.helper.get_attribute_value(attr.default_value) if attr.default_value.name else None
                if isinstance(default, bytes):
                    default = default.decode()
                if values and default is not None and default not in values:
                    problems.append("%s-%d: the default %r of %s is not among the implemented values %s"
                                    % (op, v, default, name, values))
    for p in problems:
        print(p)
    print("%d ops checked against onnx %s through opset %d: %s"
          % (len(table["ops"]), onnx.__version__, known, "%d problems" % len(problems) if problems else "ok"))
    return 1 if problems else 0


def has_schema(op, opset):
    import onnx.defs
    try:
        onnx.defs.get_schema(op, opset)
        return True
    except onnx.defs.SchemaError:
        return False


if __name__ == "__main__":
    sys.exit(main())
