// Seeds for the data layer's fuzz targets, made with the data tests' writers.
#include "data/test_files.h"
#include "seeds.h"

namespace qflow::fuzz {

using namespace qflow::data::testing;

namespace {

Bytes pattern(size_t n, unsigned seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 37 + seed * 11) % 256);
  return b;
}

// CIFAR-10 archive members as in the official archive (data_batch_2 stored last), with one
// or two records per batch.
std::vector<TarMember> cifar_members(const std::string& folder) {
  std::vector<TarMember> m;
  m.push_back({folder + "batches.meta.txt", text_bytes("airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n")});
  for (int b : {1, 3, 4, 5, 2}) m.push_back({folder + "data_batch_" + std::to_string(b) + ".bin", cifar_batch(1 + b % 2, b)});
  m.push_back({folder + "test_batch.bin", cifar_batch(2, 7)});
  m.push_back({folder + "readme.html", text_bytes("<html></html>")});
  return m;
}

}  // namespace

Seeds idx_seeds() {
  const Bytes images = idx_file(3, {2, 3, 4}, pattern(24, 1));
  const Bytes labels = idx_file(1, {5}, {0, 1, 2, 9, 3});
  return {{"images-idx3", images},
          {"labels-idx1", labels},
          {"images-idx3.gz", gzip(images)},
          {"labels-idx1.gz", gzip(labels)},
          {"matrix-idx2", idx_file(2, {3, 2}, pattern(6, 2))},
          {"empty-idx1", idx_file(1, {0}, {})},
          {"two-members.gz", [&] {
             Bytes first = gzip(Bytes(images.begin(), images.begin() + 10));
             const Bytes second = gzip(Bytes(images.begin() + 10, images.end()));
             first.insert(first.end(), second.begin(), second.end());
             return first;
           }()}};
}

Seeds png_seeds() {
  auto spec = [](uint32_t w, uint32_t h, int color, int depth, int channels, bool interlaced = false) {
    PngSpec s{.width = w, .height = h, .color_type = color, .bit_depth = depth, .interlaced = interlaced};
    const size_t row = (size_t{w} * static_cast<size_t>(channels * depth) + 7) / 8;
    s.rows = pattern(row * h, w + h + static_cast<unsigned>(depth));
    return s;
  };
  Seeds out;
  for (int depth : {1, 2, 4, 8, 16})
    out.push_back({"gray" + std::to_string(depth) + ".png", encode_png(spec(5, 3, PNG_COLOR_TYPE_GRAY, depth, 1))});
  out.push_back({"gray-alpha8.png", encode_png(spec(3, 2, PNG_COLOR_TYPE_GRAY_ALPHA, 8, 2))});
  out.push_back({"rgb8.png", encode_png(spec(4, 3, PNG_COLOR_TYPE_RGB, 8, 3))});
  out.push_back({"rgb16.png", encode_png(spec(2, 2, PNG_COLOR_TYPE_RGB, 16, 3))});
  out.push_back({"rgba8.png", encode_png(spec(3, 3, PNG_COLOR_TYPE_RGB_ALPHA, 8, 4))});
  out.push_back({"rgb8-interlaced.png", encode_png(spec(9, 9, PNG_COLOR_TYPE_RGB, 8, 3, true))});
  PngSpec palette = spec(4, 4, PNG_COLOR_TYPE_PALETTE, 4, 1);
  palette.palette = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
  for (uint8_t& b : palette.rows) b = static_cast<uint8_t>(b % 3 * 16 + b % 3);
  palette.trns = {128, 255};
  out.push_back({"palette4-trns.png", encode_png(palette)});
  PngSpec gray_trns = spec(4, 2, PNG_COLOR_TYPE_GRAY, 8, 1);
  gray_trns.trns = {0, gray_trns.rows[0]};
  out.push_back({"gray8-trns.png", encode_png(gray_trns)});
  return out;
}

Seeds tar_seeds() {
  const std::vector<TarMember> members = {{"a.txt", text_bytes("hello\n")},
                                          {"dir", {}, '5'},
                                          {"dir/" + std::string(120, 'n') + ".bin", pattern(700, 3)},
                                          {"link", {}, '2'},
                                          {"empty", {}}};
  Bytes tar = make_tar(members);
  // A pax extended header naming the next member and giving its size.
  auto record = [](const std::string& kv) {  // "<length> key=value\n", the length counting itself
    size_t len = kv.size() + 2;
    len += std::to_string(len + std::to_string(len).size()).size();
    return std::to_string(len) + " " + kv + "\n";
  };
  const std::string pax = record("path=pax/long/name/file.bin") + record("size=513");
  Bytes pax_tar = tar_header("PaxHeader/x", pax.size(), 'x');
  pax_tar.insert(pax_tar.end(), pax.begin(), pax.end());
  pax_tar.resize(pax_tar.size() + (512 - pax.size() % 512) % 512, 0);
  const Bytes rest = make_tar({{"short", pattern(513, 4)}});
  pax_tar.insert(pax_tar.end(), rest.begin(), rest.end());
  return {{"members.tar", tar}, {"members.tar.gz", gzip(tar)}, {"pax.tar", pax_tar}, {"empty.tar", make_tar({})}};
}

Seeds cifar10_batch_seeds() {
  return {{"one-record.bin", cifar_batch(1, 3)}, {"three-records.bin", cifar_batch(3, 8)}};
}

Seeds cifar10_archive_seeds() {
  const Bytes tar = make_tar(cifar_members("cifar-10-batches-bin/"));
  return {{"cifar-10-binary.tar.gz", gzip(tar)},
          {"cifar-10-binary.tar", tar},
          {"flat.tar", make_tar(cifar_members(""))},
          {"test-only.tar", make_tar({{"test_batch.bin", cifar_batch(1)}})}};
}

}  // namespace qflow::fuzz
