import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP, type BlockList, type LookupFunction } from "node:net";
import { badField, RingfenceError } from "../errors.js";
import { blockList, contains, normalizeAddress, parseCidrs } from "./cidr.js";
import { NOT_HTTP_URL, parseHttpUrl } from "./validate.js";

/**
 * Addresses no caller-supplied URL may reach unless OUTBOUND_ALLOWED_CIDRS lets it: this host,
 * private networks, link-local (cloud metadata), CGNAT, multicast, and every reserved or
 * documentation range (IANA special-purpose registries for IPv4 and IPv6).
 */
const REFUSED = blockList(
  parseCidrs(
    [
      "0.0.0.0/8,10.0.0.0/8,100.64.0.0/10,127.0.0.0/8,169.254.0.0/16,172.16.0.0/12,192.0.0.0/24",
      "192.0.2.0/24,192.88.99.0/24,192.168.0.0/16,198.18.0.0/15,198.51.100.0/24,203.0.113.0/24",
      "224.0.0.0/4,240.0.0.0/4,255.255.255.255/32",
      "::/128,::1/128,::/96,64:ff9b:1::/48,100::/64,2001::/23,2001:db8::/32,2002::/16,3fff::/20",
      "5f00::/16,fc00::/7,fe80::/10,fec0::/10,ff00::/8",
    ].join(","),
  ),
);

const GLOBAL_UNICAST = blockList(parseCidrs("2000::/3"));

/** How long a name may take to resolve before the URL is refused. */
const RESOLVE_TIMEOUT_MS = 3_000;

/** Where an IPv6 address embeds an IPv4 one that decides (mapped, NAT64). */
function embeddedIpv4(address: string): string | undefined {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  const lower = address.toLowerCase();
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex?.[1] !== undefined && hex[2] !== undefined) {
    const hi = parseInt(hex[1], 16);
    const lo = parseInt(hex[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  const nat64 = /^64:ff9b::(\d{1,3}(?:\.\d{1,3}){3})$/.exec(lower);
  return nat64?.[1];
}

export class OutboundRefused extends Error {
  override readonly name = "OutboundRefused";
}

export interface OutboundAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * The one owner of calls to URLs that callers supply (V1 callback_url, app webhooks, delegation
 * hooks, jwks_url): checked when registered, and again on the address actually connected to, so
 * a name that resolves elsewhere later (DNS rebinding) cannot reach a refused address.
 * Redirects are never followed; URLs with credentials are refused.
 */
export class OutboundGuard {
  private readonly allowed: BlockList;

  constructor(
    allowedCidrs: string | ReturnType<typeof parseCidrs>,
    private readonly resolve: (host: string) => Promise<LookupAddress[]> = resolveAll,
  ) {
    this.allowed = blockList(typeof allowedCidrs === "string" ? parseCidrs(allowedCidrs) : allowedCidrs);
  }

  /** Whether an address may be connected to. */
  allows(address: string): boolean {
    const a = normalizeAddress(address);
    if (isIP(a) === 0) return false;
    if (contains(this.allowed, a)) return true;
    const v4 = embeddedIpv4(a);
    if (v4 !== undefined) return this.allows(v4);
    // IPv6 outside global unicast (2000::/3) is never a public host.
    if (isIP(a) === 6 && !contains(GLOBAL_UNICAST, a)) return false;
    return !contains(REFUSED, a);
  }

  /**
   * Whether an address is inside OUTBOUND_ALLOWED_CIDRS: a host the operator named, which may be
   * reached over plain http where https is otherwise required (a `jwks_uri`).
   */
  listed(address: string): boolean {
    const a = normalizeAddress(address);
    return isIP(a) !== 0 && contains(this.allowed, a);
  }

  /**
   * A URL a caller registers: http(s), no credentials, and a host whose every address is allowed.
   * Refusals are 400 bad_request naming `field`.
   */
  async checkUrl(raw: string, field: string): Promise<void> {
    const problem = await this.refusal(raw);
    if (problem !== undefined) throw badField(field, problem);
  }

  /** Why a URL may not be registered, or undefined when it may (addresses resolved now). */
  async refusal(raw: string): Promise<string | undefined> {
    const url = parseHttpUrl(raw);
    if (url === undefined) return NOT_HTTP_URL;
    if (url.username !== "" || url.password !== "") return "must not carry credentials (user:password@)";
    const host = hostOf(url);
    if (isIP(host) !== 0)
      return this.allows(host) ? undefined : "must not point to a private or reserved address";
    let addresses: LookupAddress[];
    try {
      addresses = await this.resolve(host);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === "ENOTFOUND" || code === "ENODATA") return "must name a host that resolves";
      // A resolver that fails or is slow is a passing fault, not the caller's mistake.
      throw new RingfenceError("unavailable", "the URL's host could not be looked up now; try again", {
        "retry-after": "5",
      });
    }
    if (addresses.length === 0) return "must name a host that resolves";
    if (!addresses.every((a) => this.allows(a.address))) {
      return "must not resolve to a private or reserved address";
    }
    return undefined;
  }

  /** A `lookup` for node:net that connects only to allowed addresses. */
  private readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.resolve(hostname).then(
      (addresses) => {
        const ok = addresses.filter((a) => this.allows(a.address));
        if (ok.length === 0 || ok.length < addresses.length) {
          const err = Object.assign(new OutboundRefused(`${hostname} resolves to a refused address`), {
            code: "EREFUSED_ADDRESS",
          });
          callback(err, "", 4);
          return;
        }
        if (options.all === true) callback(null, ok);
        else callback(null, ok[0]?.address ?? "", ok[0]?.family ?? 4);
      },
      (err: unknown) => {
        callback(err as NodeJS.ErrnoException, "", 4);
      },
    );
  };

  /**
   * One request to a caller-supplied URL. Rejects with OutboundRefused (never connecting) when
   * the URL or the address it resolves to is not allowed; a 3xx is an answer like any other,
   * never followed.
   */
  async request(
    raw: string | URL,
    init: {
      method: string;
      headers?: Record<string, string>;
      body?: string;
      timeoutMs: number;
      signal?: AbortSignal | null;
    },
  ): Promise<OutboundAnswer> {
    const url = parseHttpUrl(raw);
    if (url === undefined) throw new OutboundRefused("not an http or https URL");
    if (url.username !== "" || url.password !== "") throw new OutboundRefused("the URL carries credentials");
    const host = hostOf(url);
    if (isIP(host) !== 0 && !this.allows(host)) throw new OutboundRefused("a private or reserved address");
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    return new Promise<OutboundAnswer>((resolve, reject) => {
      const req = send(
        url,
        {
          method: init.method,
          headers: init.headers,
          lookup: this.lookup,
          agent: false,
          timeout: init.timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (c: Buffer) => {
            size += c.length;
            // An answer is read for its status and a small body (a JWS, a key set): no more.
            if (size > 1_048_576) {
              req.destroy(new Error("the answer is larger than 1 MiB"));
              return;
            }
            chunks.push(c);
          });
          res.on("end", () => {
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
          });
          res.on("error", reject);
        },
      );
      const timer = setTimeout(
        () => req.destroy(new Error(`no answer within ${init.timeoutMs} ms`)),
        init.timeoutMs,
      );
      const abort = () => req.destroy(new Error("aborted"));
      init.signal?.addEventListener("abort", abort, { once: true });
      req.on("close", () => {
        clearTimeout(timer);
        init.signal?.removeEventListener("abort", abort);
      });
      req.on("timeout", () => req.destroy(new Error(`no answer within ${init.timeoutMs} ms`)));
      req.on("error", (err: NodeJS.ErrnoException) => {
        reject(err.code === "EREFUSED_ADDRESS" ? new OutboundRefused(err.message) : err);
      });
      req.end(init.body);
    });
  }

  /** A `fetch` for libraries that take one (jose's key sets): the same guard, no redirects. */
  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = input instanceof Request ? input.url : input;
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((v, k) => {
      headers[k] = v;
    });
    const answer = await this.request(url, {
      method: init?.method ?? "GET",
      headers,
      body: typeof init?.body === "string" ? init.body : undefined,
      timeoutMs: 5_000,
      signal: init?.signal,
    });
    const out = new Headers();
    for (const [k, v] of Object.entries(answer.headers)) {
      if (typeof v === "string") out.set(k, v);
      else if (Array.isArray(v)) for (const x of v) out.append(k, x);
    }
    const empty = answer.status === 204 || answer.status === 304;
    return new Response(empty ? null : new Uint8Array(answer.body), { status: answer.status, headers: out });
  };
}

/** The host as an address or a name: WHATWG URL already turned 0x7f000001 into 127.0.0.1. */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "");
}

async function resolveAll(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${host} did not resolve within ${RESOLVE_TIMEOUT_MS} ms`));
    }, RESOLVE_TIMEOUT_MS);
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => {
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(addresses);
    });
  });
}
