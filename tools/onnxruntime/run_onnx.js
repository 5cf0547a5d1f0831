// Runs an ONNX model with ONNX Runtime (CPU) on one float32 input; qflow's export tests use it.
//   node run_onnx.js MODEL.onnx INPUT.bin N,C,H,W OUTPUT.bin [EXPECTED.bin]
// INPUT.bin/OUTPUT.bin: raw little-endian float32, row-major. Prints the output's name and
// dims as one JSON line; with EXPECTED.bin (e.g. qflow-export --save-example's), also the
// largest difference from it, absolute and relative to the largest expected magnitude.
// Exits 1 with the runtime's message on failure.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

function readFloats(path) {
  const bytes = fs.readFileSync(path);
  // Copy into an aligned buffer: a Buffer's byteOffset need not be a multiple of 4.
  const data = new Float32Array(bytes.byteLength / 4);
  new Uint8Array(data.buffer).set(bytes);
  return data;
}

async function main() {
  const [model, inputPath, dimsText, outputPath, expectedPath] = process.argv.slice(2);
  if (!outputPath) throw new Error('usage: node run_onnx.js MODEL.onnx INPUT.bin N,C,H,W OUTPUT.bin');
  const dims = dimsText.split(',').map(Number);
  const data = readFloats(inputPath);
  const expected = dims.reduce((a, b) => a * b, 1);
  if (data.length !== expected) throw new Error(`input has ${data.length} floats, dims ${dimsText} need ${expected}`);
  // Graph optimisations off: the tests compare the graph as exported, not a rewritten one.
  const session = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled' });
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', data, dims) };
  const results = await session.run(feeds);
  const name = session.outputNames[0];
  const out = results[name];
  fs.writeFileSync(outputPath, Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
  const report = { input: session.inputNames[0], output: name, dims: out.dims };
  if (expectedPath) {
    const want = readFloats(expectedPath);
    if (want.length !== out.data.length) throw new Error(`expected ${want.length} values, the model gave ${out.data.length}`);
    let diff = 0, scale = 0;
    for (let i = 0; i < want.length; ++i) {
      diff = Math.max(diff, Math.abs(out.data[i] - want[i]));
      scale = Math.max(scale, Math.abs(want[i]));
    }
    report.max_abs_diff = diff;
    report.max_rel_diff = scale > 0 ? diff / scale : diff;
  }
  console.log(JSON.stringify(report));
}

main().catch((e) => { console.error(`run_onnx: ${e.message}`); process.exit(1); });
