import { createHash, randomUUID } from "node:crypto";
import { quote, RingfenceError } from "../errors.js";
import { noStore, type CallContext } from "../rpc/binding.js";
import type { ClientStore } from "./clients.js";
import { limitSubject } from "../net/cidr.js";
import { LuaScript, type Keys, type RedisClient } from "../redis/client.js";
import { takeWindows, tooManyAttempts, type Window, type WindowRule } from "../otp/code.js";
import { noteRefusal } from "../observability/calls.js";
import { signAccessToken, type SigningKeys } from "./keys/signing-keys.js";

export interface TokenDeps {
  clients: ClientStore;
  /** Failed client authentications per client_id and per client address (429 past them). */
  failures: AuthFailures;
  keys: SigningKeys;
  issuer: string;
  lifetimeSeconds: number;
  now?: () => number;
}

export interface TokenAnswer {
  accessToken: string;
  tokenType: "Bearer";
  expiresIn: number;
  scope: string;
}

const FORM = "application/x-www-form-urlencoded";

/**
 * POST /v1/session/oauth/token with grant_type=client_credentials (RFC 6749 section 4.4): read
 * the form, authenticate the client (HTTP Basic or the body, never both), check the scope, sign.
 */
export async function clientCredentialsGrant(
  deps: TokenDeps,
  body: { contentType: string; data: Buffer },
  ctx: CallContext,
): Promise<TokenAnswer> {
  // Answers holding tokens or credentials are never cached; errors too.
  noStore(ctx);

  const mediaType = body.contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  if (mediaType !== FORM) throw new RingfenceError("invalid_request", `Content-Type must be ${FORM}`);
  const form = readForm(body.data);

  const basic = readBasic(ctx.header("authorization"));
  if (basic !== undefined && (form.has("client_id") || form.has("client_secret"))) {
    throw new RingfenceError(
      "invalid_request",
      "use HTTP Basic or client_id/client_secret in the body, not both",
    );
  }
  const grantType = form.get("grant_type");
  if (grantType === undefined) throw new RingfenceError("invalid_request", "grant_type is required");
  if (grantType !== "client_credentials") {
    throw new RingfenceError("unsupported_grant_type", `grant_type ${quote(grantType)} is not supported`);
  }
  const clientId = basic?.clientId ?? form.get("client_id");
  const secret = basic?.secret ?? form.get("client_secret");
  const challenge: Record<string, string> =
    basic === undefined ? {} : { "www-authenticate": 'Basic realm="ringfence"' };
  const refused = () => new RingfenceError("invalid_client", "client authentication failed", challenge);
  // Every attempt takes a place among its address's failures and attempts in flight first (so
  // concurrent attempts cannot pass the limit), and gives it back when the client authenticates;
  // a window full of failures refuses outright, one full of attempts in flight makes it wait.
  // A client_id is public, so its full window must not lock out the real client: the right
  // secret still works, a wrong one gets 429.
  // Taken beside the client's lease, in the same round trip; awaited before any answer.
  const requested = readScope(form.get("scope"));
  const attempt = deps.failures.beginAttempt(ctx.clientAddress);
  void attempt.catch(() => undefined);
  const failed = async () => {
    const ending = await attempt;
    // Only failures read the client's window: a success costs one round trip here, not three.
    const [clientWait] = await Promise.all([
      deps.failures.wait(clientId),
      deps.failures.record(clientId),
      ending.fail(),
    ]);
    return clientWait > 0 ? tooManyFailures(clientWait, "TOKEN_FAILURES_CLIENT") : refused();
  };
  if (clientId === undefined || secret === undefined) throw await failed();

  const answer = await deps.clients.whileExists(clientId, secret, async (client) => {
    if (client === undefined) throw await failed();
    const ending = await attempt;
    // Off the answer path: a place not given back is dropped once stale.
    void ending.succeed().catch(() => undefined);
    if (!client.grantTypes.includes("client_credentials")) {
      throw new RingfenceError("unauthorized_client", "this client may not use the client_credentials grant");
    }
    const unknown = requested.find((s) => !client.scopes.includes(s));
    if (unknown !== undefined) {
      throw new RingfenceError("invalid_scope", `scope ${quote(unknown)} is not registered for this client`);
    }
    const iat = Math.floor((deps.now ?? Date.now)() / 1000);
    const scope = requested.join(" ");
    const accessToken = await signAccessToken(deps.keys, {
      iss: deps.issuer,
      sub: client.clientId,
      // RFC 9068 section 2.2: the client the token was issued to. Session tokens never carry it.
      client_id: client.clientId,
      aud: client.appId,
      app_id: client.appId,
      scope,
      iat,
      exp: iat + deps.lifetimeSeconds,
      jti: randomUUID(),
    });
    return { accessToken, tokenType: "Bearer" as const, expiresIn: deps.lifetimeSeconds, scope };
  });
  if (answer === undefined) throw await failed();
  return answer;
}

/** An authentication attempt holding a place among its address's attempts. */
export interface AddressAttempt {
  succeed(): Promise<void>;
  fail(): Promise<void>;
}

const NO_ATTEMPT: AddressAttempt = { succeed: () => Promise.resolve(), fail: () => Promise.resolve() };
/** An attempt in flight this long never ended (its process stopped, or Redis failed): it is dropped. */
export const STALE_ATTEMPT_MS = 10_000;
/** The longest an attempt waits for a place while its address's attempts in flight fill the window. */
export const BUSY_WAIT_MS = 2_000;
/** How often the first attempt in line looks in Redis for a place freed by another process. */
export const WAIT_POLL_MS = 5;
/** The most attempts of one address waiting in line in one process. */
export const MAX_WAITING = 256;

/**
 * An attempt waiting for a place of its address. It keeps its place in line while it looks in
 * Redis; `signal` hands it a place, or tells it to look again (undefined).
 */
class Waiter {
  private resolve: ((place: string | undefined) => void) | undefined;
  private woken = false;
  timer: NodeJS.Timeout | undefined;

  /** True while it waits for a signal (not while it looks in Redis). */
  get waiting(): boolean {
    return this.resolve !== undefined;
  }

  next(): Promise<string | undefined> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve(undefined);
    }
    return new Promise((resolve) => {
      this.resolve = resolve;
    });
  }

  signal(place: string | undefined): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const resolve = this.resolve;
    this.resolve = undefined;
    if (resolve !== undefined) resolve(place);
    else this.woken = true;
  }
}

/**
 * The attempts of one address waiting in this process, first come, first served. Only the first
 * in line looks in Redis every WAIT_POLL_MS (for a place freed by another process), so a line of
 * any length costs Redis what one waiter costs.
 */
class WaitingLine {
  private readonly waiters: Waiter[] = [];

  get length(): number {
    return this.waiters.length;
  }

  join(): Waiter {
    const waiter = new Waiter();
    this.waiters.push(waiter);
    return waiter;
  }

  /** The next signal for `waiter`; the first in line is told to look again after WAIT_POLL_MS. */
  next(waiter: Waiter): Promise<string | undefined> {
    const signal = waiter.next();
    if (this.waiters[0] === waiter && waiter.waiting) this.lookSoon(waiter);
    return signal;
  }

  leave(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    const at = this.waiters.indexOf(waiter);
    if (at >= 0) this.waiters.splice(at, 1);
    const first = this.waiters[0];
    if (at === 0 && first?.waiting === true) this.lookSoon(first);
  }

  /** Gives `place` to the first waiter that is not looking in Redis; false when there is none. */
  handOver(place: string): boolean {
    const waiter = this.waiters.find((w) => w.waiting);
    if (waiter === undefined) return false;
    waiter.signal(place);
    return true;
  }

  /** Tells every waiter to look again (a failure: the window may be full of them now). */
  wakeAll(): void {
    for (const waiter of this.waiters) waiter.signal(undefined);
  }

  private lookSoon(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    waiter.timer = setTimeout(() => {
      waiter.signal(undefined);
    }, WAIT_POLL_MS);
  }
}

const addressAttempts = LuaScript.fromFile(new URL("./address-attempts.lua", import.meta.url));

/** Sliding windows of failed client authentications, by client_id and by client address. */
export class AuthFailures {
  /** Attempts of this process waiting in line for a place, by their address's key. */
  private readonly lines = new Map<string, WaitingLine>();

  constructor(
    private readonly redis: RedisClient,
    /** Where a success gives its place back, after the answer (see Registry.afterAnswer). */
    private readonly afterAnswer: RedisClient,
    private readonly keys: Keys,
    private readonly rules: { perClient: WindowRule; perAddress: WindowRule },
    /** The longest line of one address in this process; later attempts get 429 at once. */
    private readonly maxWaiting = MAX_WAITING,
  ) {}

  private clientWindow(clientId: string): Window {
    // A digest: a caller-chosen id shapes neither the key's length nor its hash tag.
    return {
      key: this.keys.key("rl", `client:${digest(clientId)}`, "token-failures"),
      rule: this.rules.perClient,
    };
  }

  private addressKeys(address: string): [string, string] {
    const tag = `ip:${limitSubject(address)}`;
    return [this.keys.key("rl", tag, "token-failures"), this.keys.key("rl", tag, "token-attempts")];
  }

  /**
   * Starts a client authentication from `address` (see address-attempts.lua): throws 429 when
   * its failures fill TOKEN_FAILURES_IP, waits while its attempts in flight fill it (at most
   * BUSY_WAIT_MS, then 429). The answer ends the attempt: `succeed` gives its place back,
   * `fail` keeps it as a failure.
   */
  async beginAttempt(address: string | undefined): Promise<AddressAttempt> {
    const rule = this.rules.perAddress;
    if (address === undefined || rule === null) return NO_ATTEMPT;
    const keys = this.addressKeys(address);
    const [, inflight] = keys;
    const run = async (op: "begin" | "fail", member: string) =>
      (await addressAttempts.run(this.redis, keys, [
        JSON.stringify({ op, now: Date.now(), member, staleMs: STALE_ATTEMPT_MS, rule }),
      ])) as [number, number];
    /** A place taken in Redis, undefined when attempts in flight fill the window. */
    const look = async () => {
      const mine = randomUUID();
      const [waitMs, busy] = await run("begin", mine);
      if (waitMs > 0) {
        this.lines.get(inflight)?.wakeAll();
        throw tooManyFailures(waitMs, "TOKEN_FAILURES_IP");
      }
      return busy === 0 ? mine : undefined;
    };
    const attempt = (held: string): AddressAttempt => ({
      succeed: async () => {
        // A waiter here takes the place over as it is: no round trip for either.
        if (this.lines.get(inflight)?.handOver(held) === true) {
          await this.afterAnswer.zadd(inflight, "XX", Date.now(), held);
          return;
        }
        await this.afterAnswer.zrem(inflight, held);
      },
      fail: async () => {
        try {
          await run("fail", held);
        } finally {
          this.lines.get(inflight)?.wakeAll();
        }
      },
    });

    // Nobody of this process waiting for this address: try at once.
    if ((this.lines.get(inflight)?.length ?? 0) === 0) {
      const mine = await look();
      if (mine !== undefined) return attempt(mine);
    }
    const line = this.lines.get(inflight) ?? new WaitingLine();
    if (line.length >= this.maxWaiting) {
      noteRefusal("TOKEN_FAILURES_IP");
      throw tooManyAttempts(
        "too many client authentications waiting from this address: try again later",
        1_000,
      );
    }
    this.lines.set(inflight, line);
    const waiter = line.join();
    const until = Date.now() + BUSY_WAIT_MS;
    try {
      for (;;) {
        const handed = await line.next(waiter);
        const place = handed ?? (await look());
        if (place !== undefined) return attempt(place);
        if (Date.now() >= until) throw tooManyFailures(1_000, "TOKEN_FAILURES_IP");
      }
    } finally {
      line.leave(waiter);
      if (line.length === 0 && this.lines.get(inflight) === line) this.lines.delete(inflight);
    }
  }

  /** How many attempts from `address` wait in this process's line for a place. */
  waitingFrom(address: string): number {
    const [, inflight] = this.addressKeys(address);
    return this.lines.get(inflight)?.length ?? 0;
  }

  /** The ms until the client's failure window has room; 0 when it has. */
  async wait(clientId: string | undefined): Promise<number> {
    if (clientId === undefined) return 0;
    return (await takeWindows(this.redis, [this.clientWindow(clientId)], randomUUID(), "peek")).waitMs;
  }

  async record(clientId: string | undefined): Promise<void> {
    if (clientId === undefined) return;
    await takeWindows(this.redis, [this.clientWindow(clientId)], randomUUID(), "add");
  }
}

/** The form's parameters; RFC 6749 section 3.2: none may be given more than once. */
function readForm(data: Buffer): Map<string, string> {
  const params = new URLSearchParams(data.toString("utf8"));
  const form = new Map<string, string>();
  for (const [k, v] of params) {
    if (form.has(k)) throw new RingfenceError("invalid_request", `parameter ${k} is given more than once`);
    form.set(k, v);
  }
  return form;
}

/** RFC 6749 section 2.3.1: Basic with the form-urlencoded client_id and secret. */
function readBasic(header: string | undefined): { clientId: string; secret: string } | undefined {
  if (header === undefined) return undefined;
  const match = /^Basic\s+([A-Za-z0-9+/=._~-]+)\s*$/i.exec(header);
  const challenge = { "www-authenticate": 'Basic realm="ringfence"' };
  if (match?.[1] === undefined) {
    throw new RingfenceError("invalid_client", "the Authorization header is not HTTP Basic", challenge);
  }
  const decoded = Buffer.from(match[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) throw new RingfenceError("invalid_client", "malformed HTTP Basic credentials", challenge);
  try {
    const decode = (s: string) => decodeURIComponent(s.replace(/\+/g, " "));
    return { clientId: decode(decoded.slice(0, colon)), secret: decode(decoded.slice(colon + 1)) };
  } catch {
    throw new RingfenceError("invalid_client", "malformed HTTP Basic credentials", challenge);
  }
}

/** RFC 6749 section 3.3: scope-tokens separated by single spaces; omitted grants none. */
function readScope(scope: string | undefined): string[] {
  if (scope === undefined || scope === "") return [];
  if (!/^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/.test(scope)) {
    throw new RingfenceError("invalid_scope", "scope must be scope tokens separated by single spaces");
  }
  return [...new Set(scope.split(" "))];
}

/** A caller-chosen id as a key part: fixed length, and no brace can move the hash tag. */
function digest(id: string): string {
  return createHash("sha256").update(id).digest("base64url");
}

function tooManyFailures(
  waitMs: number,
  rule: "TOKEN_FAILURES_CLIENT" | "TOKEN_FAILURES_IP",
): RingfenceError {
  noteRefusal(rule);
  return tooManyAttempts("too many failed client authentications: try again later", waitMs);
}
