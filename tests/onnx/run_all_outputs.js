// Runs an ONNX model in ONNX Runtime and writes every graph output (the deploy tests' view of
// the integer activations exposed by expose_quantized.py, and the outputs of models with
// several).
//   node tests/onnx/run_all_outputs.js MODEL.onnx INPUT.bin N,C,H,W [INPUT2.bin DIMS2 ...] OUT_DIR
// Feeds the graph inputs in order (raw float32 each); writes OUT_DIR/<k>.bin (raw data of
// output k) and prints [{name, type, dims, file}] as JSON.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, '..', '..', 'tools', 'onnxruntime', 'node_modules', 'onnxruntime-node'));

async function main() {
  const args = process.argv.slice(2);
  const model = args[0], outDir = args[args.length - 1], inputs = args.slice(1, -1);
  if (inputs.length === 0 || inputs.length % 2 !== 0) throw new Error('usage: MODEL.onnx (INPUT.bin DIMS)... OUT_DIR');
  const session = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled' });
  if (inputs.length / 2 !== session.inputNames.length)
    throw new Error(`the model has ${session.inputNames.length} inputs, ${inputs.length / 2} were given`);
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    const bytes = fs.readFileSync(inputs[2 * i]);
    const data = new Float32Array(bytes.byteLength / 4);
    new Uint8Array(data.buffer).set(bytes);
    feeds[name] = new ort.Tensor('float32', data, inputs[2 * i + 1].split(',').map(Number));
  });
  const results = await session.run(feeds);
  const report = session.outputNames.map((name, k) => {
    const t = results[name];
    const file = path.join(outDir, `${k}.bin`);
    fs.writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    return { name, type: t.type, dims: t.dims, file };
  });
  console.log(JSON.stringify(report));
}

main().catch((e) => { console.error(`run_all_outputs: ${e.message}`); process.exit(1); });
