"""Checks an ONNX file with the official checker and prints its structure as one JSON line.

    /usr/bin/python3 tests/onnx/check_onnx.py MODEL.onnx

Runs onnx.checker.check_model(model, full_check=True) (which includes strict shape
inference) with Debian's python3-onnx; exits 1 with the checker's message when it fails.
The JSON (opset, inputs/outputs with dims, nodes with attributes, initializers, metadata)
lets the C++ tests assert what was written without linking protobuf themselves.
"""
import json
import sys

import onnx
from onnx import helper, numpy_helper


def dims(value_info):
    shape = value_info.type.tensor_type.shape
    return [d.dim_param if d.HasField("dim_param") else d.dim_value for d in shape.dim]


def attribute(a):
    value = helper.get_attribute_value(a)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value).tolist()
    return list(value) if isinstance(value, (list, tuple)) else value


def main(path):
    model = onnx.load(path)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # the checker raises ValidationError / InferenceError
        print(f"check_onnx: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    g = model.graph
    out = {
        "ir_version": model.ir_version,
        "opset": {o.domain: o.version for o in model.opset_import},
        "producer": [model.producer_name, model.producer_version],
        "graph_name": g.name,
        "doc": g.doc_string,
        "inputs": [{"name": v.name, "elem_type": v.type.tensor_type.elem_type, "dims": dims(v), "doc": v.doc_string}
                   for v in g.input],
        "outputs": [{"name": v.name, "elem_type": v.type.tensor_type.elem_type, "dims": dims(v), "doc": v.doc_string}
                    for v in g.output],
        "nodes": [{"op": n.op_type, "name": n.name, "inputs": list(n.input), "outputs": list(n.output),
                   "attrs": {a.name: attribute(a) for a in n.attribute}} for n in g.node],
        "initializers": {t.name: {"data_type": t.data_type, "dims": list(t.dims),
                                  "values": numpy_helper.to_array(t).flatten()[:8].tolist()}
                         for t in g.initializer},
        "metadata": {p.key: p.value for p in model.metadata_props},
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
