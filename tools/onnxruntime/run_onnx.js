// Runs an ONNX model with ONNX Runtime (CPU) on one float32 input; qflow's export tests use it.
//   node run_onnx.js MODEL.onnx INPUT.bin N,C,H,W OUTPUT.bin
// INPUT.bin/OUTPUT.bin: raw little-endian float32, row-major. Prints the output's name and
// dims as one JSON line. Exits 1 with the runtime's message on failure.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const [model, inputPath, dimsText, outputPath] = process.argv.slice(2);
  if (!outputPath) throw new Error('usage: node run_onnx.js MODEL.onnx INPUT.bin N,C,H,W OUTPUT.bin');
  const dims = dimsText.split(',').map(Number);
  const bytes = fs.readFileSync(inputPath);
  // Copy into an aligned buffer: a Buffer's byteOffset need not be a multiple of 4.
  const data = new Float32Array(bytes.byteLength / 4);
  new Uint8Array(data.buffer).set(bytes);
  const expected = dims.reduce((a, b) => a * b, 1);
  if (data.length !== expected) throw new Error(`input has ${data.length} floats, dims ${dimsText} need ${expected}`);
  // Graph optimisations off: the tests compare the graph as exported, not a rewritten one.
  const session = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled' });
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', data, dims) };
  const results = await session.run(feeds);
  const name = session.outputNames[0];
  const out = results[name];
  fs.writeFileSync(outputPath, Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
  console.log(JSON.stringify({ input: session.inputNames[0], output: name, dims: out.dims }));
}

main().catch((e) => { console.error(`run_onnx: ${e.message}`); process.exit(1); });
