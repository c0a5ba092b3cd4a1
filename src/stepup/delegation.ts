import { CompactSign, compactVerify, createRemoteJWKSet, customFetch } from "jose";
import { z } from "zod";
import { silentLogger, type Logger } from "../log.js";
import type { SigningKeys } from "../oauth/keys/signing-keys.js";
import { GRANT_MODES, type IdentifierType } from "./needs.js";
import { GRANTED_FOR, STATUSES, checkDecision, type Decision } from "./rules.js";

/** What the service POSTs to a delegation hook (docs/session-api.md#delegation-hooks), as JSON. */
export interface HookRequest {
  scope_requested: string;
  user_id: string;
  identifiers: { type: IdentifierType; value: string }[];
  signals: Record<string, unknown>;
  metadata: Record<string, unknown>;
}

export interface DelegationOptions {
  /** The service's signing keys: the request signature is made with the current one. */
  keys: SigningKeys;
  /** The whole hook call, answer and its verification included; default 2000 (docs/session-api.md#delegation-hooks). */
  timeoutMs?: number;
  /** How long an app's key set is used before it is fetched again; default 600000 (10 min). */
  jwksCacheMs?: number;
  /**
   * The least time between two fetches of one key set: an answer signed with an unknown kid
   * fetches the set again at most this often, so a hook cannot make us hammer its JWKS; default 5000.
   */
  jwksCooldownMs?: number;
  /** For the hook and the key sets; default the global fetch. */
  fetch?: typeof fetch;
  /** Failures are logged at warn; default silent. */
  logger?: Logger;
}

/** Algorithms an app may sign its decisions with: asymmetric only, so never `none` or an HMAC. */
const ANSWER_ALGORITHMS = [
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
  "PS256",
  "PS384",
  "PS512",
  "RS256",
  "RS384",
  "RS512",
];

/** A compact JWS decision is a few hundred bytes; anything this large is not one. */
const MAX_ANSWER_BYTES = 64 * 1024;
/** Key sets kept in memory, least recently used dropped first. */
const MAX_KEY_SETS = 1000;

/** The decision payload a hook signs (docs/session-api.md#delegation-hooks); unknown members are ignored. */
const HookDecision = z.object({
  status: z.enum(STATUSES),
  granted_for: z.number().int().min(GRANTED_FOR.min).max(GRANTED_FOR.max),
  grant_mode: z.enum(GRANT_MODES),
  steps: z
    .array(z.object({ order: z.number().int(), key: z.string(), expiration_duration: z.number().int() }))
    .default([]),
});

/** Why a hook's answer was refused; jose and zod errors and fetch failures carry their own. */
class HookFailure extends Error {
  override readonly name = "HookFailure";
}

type KeySet = ReturnType<typeof createRemoteJWKSet>;

/** The decision whenever a hook cannot be trusted: nothing is granted. */
export function blockDecision(): Decision {
  return { status: "block", grantedFor: 0, grantMode: "single-use", steps: [] };
}

/**
 * Asks a delegated entry's hook for a step-up decision (docs/session-api.md#delegation-hooks).
 *
 * The request: `POST <hook url>` with the JSON body of HookRequest and
 * `X-Webhook-Signature: <protected header>..<signature>`, a compact JWS of the exact body bytes
 * with a detached payload (RFC 7515 appendix F), header `{alg: "ES256", kid, typ: "JOSE"}`,
 * signed with the service's current signing key. A hook verifies it with the service's key set:
 *
 *     const [h, , s] = req.headers["x-webhook-signature"].split(".");
 *     const jwks = createRemoteJWKSet(new URL("<auth_url>/.well-known/jwks.json"));
 *     await compactVerify(`${h}.${base64url(rawBody)}.${s}`, jwks, { algorithms: ["ES256"] });
 *
 * (the payload is the raw body as received: re-serialising the parsed JSON breaks the signature).
 * The signature binds the body, not the moment: a hook that cares about replays should refuse
 * a request it has already seen.
 *
 * The answer: 2xx with content type `application/jose` (or any `text/*`) and, as the body, a
 * compact JWS signed by a key of the app's `jwks_url`, whose payload is the JSON decision
 * `{status, granted_for, grant_mode, steps: [{order, key, expiration_duration}]}`, held to the
 * same rules as a direct entry's (steps only for `review`, orders 1..n, a `verify_email` step only
 * for a user with an email address, a `verify_sms` one only with a phone number).
 *
 * Whatever goes wrong — the hook unreachable, slow (the whole call has `timeoutMs`), not 2xx,
 * unsigned, signed by a key the app does not publish (after one fresh fetch of its key set),
 * or a payload out of bounds — the decision is `block`; `decide` never throws.
 */
export class DelegationClient {
  private readonly timeoutMs: number;
  private readonly jwksCacheMs: number;
  private readonly jwksCooldownMs: number;
  private readonly fetch: typeof fetch;
  private readonly logger: Logger;
  private readonly keySets = new Map<string, KeySet>();

  constructor(private readonly opts: DelegationOptions) {
    this.timeoutMs = opts.timeoutMs ?? 2_000;
    this.jwksCacheMs = opts.jwksCacheMs ?? 600_000;
    this.jwksCooldownMs = opts.jwksCooldownMs ?? 5_000;
    this.fetch = opts.fetch ?? fetch;
    this.logger = opts.logger ?? silentLogger;
    if (!Number.isInteger(this.timeoutMs) || this.timeoutMs <= 0) {
      throw new Error("timeoutMs must be a positive integer");
    }
  }

  async decide(entry: { url: string }, jwksUrl: string, request: HookRequest): Promise<Decision> {
    const deadline = AbortSignal.timeout(this.timeoutMs);
    try {
      return await Promise.race([this.ask(entry.url, jwksUrl, request, deadline), rejectOnAbort(deadline)]);
    } catch (err) {
      this.logger.warn("step-up hook refused: the decision is block", {
        hook: redact(entry.url),
        scope: request.scope_requested,
        reason: describe(err),
      });
      return blockDecision();
    }
  }

  private async ask(url: string, jwksUrl: string, request: HookRequest, signal: AbortSignal) {
    const body = JSON.stringify(request);
    const res = await this.fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/jose, text/plain",
        "x-webhook-signature": await signDetached(this.opts.keys, body),
      },
      body,
      signal,
      // A hook answers itself; following a redirect would send the signed request elsewhere.
      redirect: "error",
    });
    if (res.status < 200 || res.status > 299) {
      await res.body?.cancel();
      throw new HookFailure(`the hook answered ${res.status}`);
    }
    const type = (res.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
    if (type !== "application/jose" && !type.startsWith("text/")) {
      await res.body?.cancel();
      throw new HookFailure(`the hook answered content type "${type}", not application/jose`);
    }
    const jws = (await readText(res, MAX_ANSWER_BYTES)).trim();
    const { payload } = await compactVerify(jws, this.keySet(jwksUrl), { algorithms: ANSWER_ALGORITHMS });
    const parsed = HookDecision.parse(JSON.parse(new TextDecoder().decode(payload)));
    const checked = checkDecision(
      {
        status: parsed.status,
        grantedFor: parsed.granted_for,
        grantMode: parsed.grant_mode,
        steps: parsed.steps.map((s) => ({
          order: s.order,
          key: s.key,
          expirationDuration: s.expiration_duration,
        })),
      },
      new Set(request.identifiers.map((i) => i.type)),
    );
    if ("problem" in checked) {
      throw new HookFailure(`decision ${checked.problem.field} ${checked.problem.message}`);
    }
    return checked.decision;
  }

  /**
   * One remote key set per URL (jose): cached for jwksCacheMs, fetched again once when an answer
   * names an unknown kid, and not more often than jwksCooldownMs; concurrent callers share a fetch.
   */
  private keySet(jwksUrl: string): KeySet {
    let set = this.keySets.get(jwksUrl);
    if (set !== undefined) {
      this.keySets.delete(jwksUrl);
    } else {
      set = createRemoteJWKSet(new URL(jwksUrl), {
        cacheMaxAge: this.jwksCacheMs,
        cooldownDuration: this.jwksCooldownMs,
        timeoutDuration: this.timeoutMs,
        [customFetch]: this.fetch,
      });
      const oldest = this.keySets.keys().next();
      if (this.keySets.size >= MAX_KEY_SETS && oldest.done !== true) this.keySets.delete(oldest.value);
    }
    this.keySets.set(jwksUrl, set);
    return set;
  }
}

/** `<protected header>..<signature>`: a compact JWS of `body` with the payload detached (RFC 7515 appendix F). */
export async function signDetached(keys: SigningKeys, body: string): Promise<string> {
  const key = await keys.current();
  const jws = await new CompactSign(new TextEncoder().encode(body))
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: "JOSE" })
    .sign(key.privateKey);
  return `${jws.slice(0, jws.indexOf("."))}.${jws.slice(jws.lastIndexOf("."))}`;
}

function rejectOnAbort(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    signal.addEventListener(
      "abort",
      () => {
        reject(new HookFailure("the hook did not answer in time"));
      },
      { once: true },
    );
  });
}

async function readText(res: Response, max: number): Promise<string> {
  if (Number(res.headers.get("content-length")) > max) {
    await res.body?.cancel();
    throw new HookFailure(`the answer is larger than ${max} bytes`);
  }
  if (res.body === null) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  // A fetch body yields bytes; leaving the loop early cancels the stream.
  for await (const chunk of res.body as ReadableStream<Uint8Array>) {
    size += chunk.byteLength;
    if (size > max) throw new HookFailure(`the answer is larger than ${max} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** The hook without its query string, which may carry a secret of the app's. */
function redact(url: string): string {
  return URL.canParse(url) ? `${new URL(url).origin}${new URL(url).pathname}` : "(invalid url)";
}

function describe(err: unknown): string {
  if (err instanceof z.ZodError) return `bad decision payload: ${z.prettifyError(err)}`;
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  const cause = err.cause instanceof Error ? ` (${err.cause.message})` : "";
  return `${typeof code === "string" ? `${code}: ` : ""}${err.message}${cause}`;
}
