import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  CompactSign,
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  type CryptoKey,
  type JWK,
} from "jose";

export interface HookCall {
  method: string;
  headers: IncomingHttpHeaders;
  /** The raw body, exactly as received. */
  body: string;
}

export interface HookAnswer {
  status?: number;
  contentType?: string;
  body: string;
  headers?: Record<string, string>;
  /** Milliseconds to wait before answering. */
  delayMs?: number;
}

/** A real HTTP peer on loopback: answers every request with `answer`, recording each. */
export class Peer {
  readonly calls: HookCall[] = [];
  answer: (call: HookCall) => HookAnswer | Promise<HookAnswer> = () => ({ status: 404, body: "" });

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(path: string): Promise<Peer> {
    const ref: { self?: Peer } = {};
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const self = ref.self;
        if (self === undefined) return;
        const call = {
          method: req.method ?? "",
          headers: req.headers,
          body: Buffer.concat(chunks).toString(),
        };
        self.calls.push(call);
        void (async () => {
          const a = await self.answer(call);
          if (a.delayMs !== undefined) await new Promise((r) => setTimeout(r, a.delayMs));
          res.statusCode = a.status ?? 200;
          if (a.contentType !== undefined) res.setHeader("content-type", a.contentType);
          for (const [name, value] of Object.entries(a.headers ?? {})) res.setHeader(name, value);
          res.end(a.body);
        })().catch(() => res.destroy());
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const self = new Peer(server, `http://127.0.0.1:${port}${path}`);
    ref.self = self;
    return self;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** A signing key of the "app", published in its JWKS. */
export interface AppKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export async function appKey(): Promise<AppKey> {
  const pair = await generateKeyPair("ES256", { extractable: true });
  const jwk = await exportJWK(pair.publicKey);
  const kid = await calculateJwkThumbprint(jwk);
  return { kid, privateKey: pair.privateKey, publicJwk: { ...jwk, kid, alg: "ES256", use: "sig" } };
}

/** The app's JWKS endpoint: serves `keys`, counting fetches. */
export async function jwksServer(keys: AppKey[]): Promise<Peer & { keys: AppKey[] }> {
  const peer = Object.assign(await Peer.start("/.well-known/jwks.json"), { keys });
  peer.answer = () => ({
    contentType: "application/json",
    body: JSON.stringify({ keys: peer.keys.map((k) => k.publicJwk) }),
  });
  return peer;
}

/** A decision as a hook signs it: a compact JWS over the JSON payload. */
export function signDecision(
  key: { kid: string; privateKey: CryptoKey | Uint8Array },
  payload: unknown,
  alg = "ES256",
): Promise<string> {
  return signBytes(key, JSON.stringify(payload), alg);
}

/** A compact JWS over any payload text. */
export function signBytes(
  key: { kid: string; privateKey: CryptoKey | Uint8Array },
  payload: string,
  alg = "ES256",
): Promise<string> {
  return new CompactSign(new TextEncoder().encode(payload))
    .setProtectedHeader({ alg, kid: key.kid })
    .sign(key.privateKey);
}
