// Serves a static folder (a site built by web/build.sh) on 127.0.0.1 only, with the types a
// browser needs for the page's module (application/wasm for streaming compilation).
//   node web/serve.mjs [DIR] [PORT]      (used by web/serve.sh and web/test/page.mjs)
import http from "node:http";
import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript",
  ".wasm": "application/wasm",
  ".png": "image/png",
  ".json": "application/json",
};

/** Starts serving `dir` on 127.0.0.1:`port` (0: any free port); resolves to the server. */
export function serve(dir, port = 0) {
  const root = path.resolve(dir);
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    let file = path.join(root, decodeURIComponent(url.pathname));
    if (!file.startsWith(root)) {
      res.writeHead(403).end();
      return;
    }
    try {
      if ((await fs.stat(file)).isDirectory()) file = path.join(file, "index.html");
      const body = await fs.readFile(file);
      const type = TYPES[path.extname(file)] ?? "application/octet-stream";
      res.writeHead(200, { "content-type": type, "content-length": body.length }).end(body);
    } catch {
      res.writeHead(404, { "content-type": "text/plain" }).end(`not found: ${url.pathname}\n`);
    }
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [dir = "web/dist", port = "8000"] = process.argv.slice(2);
  const server = await serve(dir, Number(port));
  console.log(`serving ${dir} on http://127.0.0.1:${server.address().port}/ (Ctrl-C stops)`);
}
