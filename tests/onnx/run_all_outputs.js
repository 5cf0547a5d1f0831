// Runs an ONNX model in ONNX Runtime and writes every graph output (the deploy tests' view of
// the integer activations exposed by expose_quantized.py).
//   node tests/onnx/run_all_outputs.js MODEL.onnx INPUT.bin N,C,H,W OUT_DIR
// Writes OUT_DIR/<k>.bin (raw data of output k) and prints [{name, type, dims, file}] as JSON.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, '..', '..', 'tools', 'onnxruntime', 'node_modules', 'onnxruntime-node'));

async function main() {
  const [model, inputPath, dimsText, outDir] = process.argv.slice(2);
  const bytes = fs.readFileSync(inputPath);
  const data = new Float32Array(bytes.byteLength / 4);
  new Uint8Array(data.buffer).set(bytes);
  const dims = dimsText.split(',').map(Number);
  const session = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled' });
  const results = await session.run({ [session.inputNames[0]]: new ort.Tensor('float32', data, dims) });
  const report = session.outputNames.map((name, k) => {
    const t = results[name];
    const file = path.join(outDir, `${k}.bin`);
    fs.writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    return { name, type: t.type, dims: t.dims, file };
  });
  console.log(JSON.stringify(report));
}

main().catch((e) => { console.error(`run_all_outputs: ${e.message}`); process.exit(1); });
