/**
 * A real browser for end-to-end tests: Debian's headless `chromium` (installed by .ci/run, as
 * redis-server is) driven over the DevTools Protocol by puppeteer-core, and the web app it opens:
 * one page served on its own origin, whose backend passes every `/v1/` call on to the service.
 */
import { accessSync, constants } from "node:fs";
import { createServer, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { delimiter, join } from "node:path";
import puppeteer, { type Browser } from "puppeteer-core";

/** The `chromium` on PATH; a test needing it fails with how to install it. */
export function chromiumPath(): string {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    const path = join(dir, "chromium");
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not in this directory
    }
  }
  throw new Error(
    "no chromium on PATH: the browser tests need Debian's chromium (apt-get install chromium; .ci/run installs it)",
  );
}

/**
 * Headless Chromium, closed by `browser.close()`. Over a pipe rather than a WebSocket: the browser
 * ends when the pipe does, so a test process that dies any way leaves no browser behind.
 * `--no-sandbox`: CI runs as root, where Chromium's sandbox refuses to start;
 * `--disable-dev-shm-usage`: a container's /dev/shm is small.
 */
export function launchChromium(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    pipe: true,
    args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
  });
}

/** The server of one web page; its API calls reach the service through it. */
export interface PageServer {
  /** `http://localhost:<port>`: localhost is a secure context, where WebAuthn works over http. */
  origin: string;
  close(): Promise<void>;
}

/** Hop-by-hop headers (RFC 9110 section 7.6.1): each connection's own, never passed on. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name)));
}

/**
 * Serves `html` at `/` on 127.0.0.1 (a port the system picks) and passes every `/v1/` request on
 * to `apiBaseUrl` (method, headers, body; then the status, headers and body of the answer), as the
 * backend of a web app does: the page calls the API on its own origin.
 */
export async function startPageServer(html: string, apiBaseUrl: string): Promise<PageServer> {
  const server = createServer((req, res) => {
    const path = req.url ?? "/";
    if (path.startsWith("/v1/")) {
      const target = new URL(path, apiBaseUrl);
      const upstream = httpRequest(
        target,
        { method: req.method, headers: { ...endToEnd(req.headers), host: target.host } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
          answer.pipe(res);
        },
      );
      upstream.on("error", (err) => {
        if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
        res.end(`proxy: ${err.message}`);
      });
      req.pipe(upstream);
      return;
    }
    if (req.method === "GET" && path === "/") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
      res.end(html);
      return;
    }
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://localhost:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        // The browser keeps its connections open: they end with the server.
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}
