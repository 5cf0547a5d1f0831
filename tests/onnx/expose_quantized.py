"""Adds the output of every QuantizeLinear node of an ONNX model as a graph output.

    /usr/bin/python3 tests/onnx/expose_quantized.py IN.onnx OUT.onnx

The deploy tests run OUT.onnx in ONNX Runtime to read the integer activations it computes and
compare them with qflow's, layer by layer. Prints the exposed names as a JSON list.
"""
import json
import sys

import onnx
from onnx import helper


def main(src, dst):
    model = onnx.load(src)
    g = model.graph
    types = {t.name: t.data_type for t in g.initializer}
    names = []
    for node in g.node:
        if node.op_type != "QuantizeLinear":
            continue
        # The output's integer type is the zero point's.
        g.output.append(helper.make_tensor_value_info(node.output[0], types[node.input[2]], None))
        names.append(node.output[0])
    onnx.save(model, dst)
    print(json.dumps(names))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
