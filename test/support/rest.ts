import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { Buffer } from "node:buffer";

/** A JSON object as tests read it. */
export type Json = Record<string, unknown>;

/** What the service answered to one REST call, its body already read. */
export interface RestAnswer {
  status: number;
  headers: Headers;
  /**
   * The body parsed as JSON. An empty answer or one that is not JSON leaves it undefined (read
   * `text` then): typed as the object tests expect, so that they can read its fields directly.
   */
  body: Json;
  /** The body exactly as received. */
  text: string;
}

export interface RestOptions {
  /** Sent as JSON, with Content-Type: application/json. */
  body?: unknown;
  /** Sent as it is (malformed JSON, a form, bytes), with Content-Type: application/json unless `headers` set one. */
  raw?: string | Uint8Array;
  /** Sent URL-encoded, with Content-Type: application/x-www-form-urlencoded. */
  form?: Record<string, string>;
  /** Sets Authorization: Bearer <bearer>. */
  bearer?: string;
  /** Sent last: they win over what the options above set. */
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface Rest {
  get(path: string, headers?: Record<string, string>): Promise<RestAnswer>;
  /** POSTs `body` as JSON. */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<RestAnswer>;
  call(method: string, path: string, options?: RestOptions): Promise<RestAnswer>;
}

/**
 * REST calls to the service at `baseUrl`, through the global `fetch` (which test/support/hooks.ts
 * wraps to check every V1 answer against the SDK models).
 */
export function rest(baseUrl: string): Rest {
  const call = async (method: string, path: string, o: RestOptions = {}): Promise<RestAnswer> => {
    const sent =
      o.form !== undefined
        ? { type: "application/x-www-form-urlencoded", data: new URLSearchParams(o.form).toString() }
        : o.raw !== undefined
          ? { type: "application/json", data: o.raw }
          : o.body !== undefined
            ? { type: "application/json", data: JSON.stringify(o.body) }
            : undefined;
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        ...(sent === undefined ? {} : { "content-type": sent.type }),
        ...(o.bearer === undefined ? {} : { authorization: `Bearer ${o.bearer}` }),
        ...o.headers,
      },
      ...(sent === undefined ? {} : { body: sent.data }),
      ...(o.signal === undefined ? {} : { signal: o.signal }),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: parseJson(text) as Json, text };
  };
  return {
    get: (path, headers) => call("GET", path, { headers }),
    post: (path, body, headers) => call("POST", path, { body, headers }),
    call,
  };
}

/** An Authorization: Basic header for `user` and `password`. */
export function basicAuth(user: string, password: string): { authorization: string } {
  return { authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}` };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** A JSON REST call sent from `localAddress` (another loopback address: another client). */
export function callFrom(
  localAddress: string,
  url: string,
  method: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; body: Json }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = httpRequest(
      url,
      {
        method,
        localAddress,
        headers: { ...(data === undefined ? {} : { "content-type": "application/json" }), ...headers },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) as Json });
        });
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}
