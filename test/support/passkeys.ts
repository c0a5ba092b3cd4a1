/**
 * Shared set-up of the passkey tests (docs/session-api.md#passkeys): a service with apps whose
 * relying party is set, users logged in by password (their session registers passkeys), a
 * software authenticator per user, and calls from any loopback address (another network).
 */
import { randomBytes } from "node:crypto";
import { expect } from "chai";
import { RelyingParties, type RelyingParty } from "../../src/passkeys/relying-party.js";
import { PasskeyStore, type Passkey } from "../../src/passkeys/store.js";
import { hashPassword } from "../../src/session/password.js";
import { startTestApp, type TestApp } from "./app.js";
import { sample } from "./metrics.js";
import { callFrom, rest, type Json, type RestAnswer } from "./rest.js";
import { SoftAuthenticator } from "./webauthn.js";

export const RP_ID = "example.com";
export const ORIGIN = "https://login.example.com";
export const RELYING_PARTY: RelyingParty = { rpId: RP_ID, origins: ["https://example.com", ORIGIN] };
export const PASSWORD = "correct horse battery";
/** The one answer to every passkey refused at a login. */
export const REFUSED = { code: "invalid_credentials", message: "the passkey was not accepted" };

/** What the service answered, read the same way from the default address or another. */
export interface Answer {
  status: number;
  body: Json;
  retryAfter: string | undefined;
}

/** A user of an app with a session (logged in by password) and its own authenticator. */
export interface PasskeyUser {
  appId: string;
  userId: string;
  email: string;
  phone: string | undefined;
  bearer: string;
  auth: SoftAuthenticator;
}

let hashed: Promise<string> | undefined;
let seq = 0;

export class PasskeyRig {
  private constructor(readonly app: TestApp) {}

  /** The passkey set-up over a service started elsewhere (its owner stops it). */
  static over(app: TestApp): PasskeyRig {
    return new PasskeyRig(app);
  }

  static async start(env: Record<string, string> = {}): Promise<PasskeyRig> {
    return new PasskeyRig(await startTestApp({ WEBHOOK_BACKOFF_BASE_MS: "50", ...env }));
  }

  /** The service's store of passkeys, to read what a call left stored. */
  get store(): PasskeyStore {
    return new PasskeyStore(this.app.registry.redis, this.app.registry.keys);
  }

  /** A call from 127.0.0.1, or from `from` (another loopback address: another client network). */
  async call(
    method: string,
    path: string,
    o: { body?: unknown; bearer?: string; from?: string } = {},
  ): Promise<Answer> {
    if (o.from === undefined) {
      const r = await rest(this.app.baseUrl).call(method, path, { body: o.body, bearer: o.bearer });
      return { status: r.status, body: r.body, retryAfter: r.headers.get("retry-after") ?? undefined };
    }
    const headers: Record<string, string> =
      o.bearer === undefined ? {} : { authorization: `Bearer ${o.bearer}` };
    const r = await callFrom(o.from, `${this.app.baseUrl}${path}`, method, o.body, headers);
    const retryAfter = r.headers["retry-after"];
    return {
      status: r.status,
      body: r.body,
      retryAfter: typeof retryAfter === "string" ? retryAfter : undefined,
    };
  }

  /** An app, its relying party set as `ringfence apps passkeys` sets it (none with null). */
  async newApp(rp: RelyingParty | null = RELYING_PARTY): Promise<{ appId: string; mgmtKey: string }> {
    const { app, managementApiKey } = await this.app.registry.apps.create(`Passkeys ${++seq}`);
    if (rp !== null)
      await new RelyingParties(this.app.registry.redis, this.app.registry.keys).set(app.appId, rp);
    return { appId: app.appId, mgmtKey: managementApiKey };
  }

  /**
   * A user of `appId` with an email (and a phone with `phone`) and PASSWORD, logged in by password
   * from `from`: that network becomes a known source of its identifiers.
   */
  async user(appId: string, o: { phone?: boolean; from?: string } = {}): Promise<PasskeyUser> {
    const n = ++seq;
    const email = `passkey-user-${n}-${randomBytes(3).toString("hex")}@example.com`;
    const phone = o.phone === true ? `+336129${String(n).padStart(5, "0")}` : undefined;
    hashed ??= hashPassword(PASSWORD);
    const made = await this.app.registry.users.create(
      appId,
      [
        { type: "email_address", value: email },
        ...(phone === undefined ? [] : [{ type: "phone_number" as const, value: phone }]),
      ],
      await hashed,
    );
    if (made === undefined) throw new Error(`${email} is taken`);
    const login = await this.call("POST", "/v1/session/login/password", {
      body: { app_id: appId, identifier: { type: "email_address", value: email }, password: PASSWORD },
      from: o.from,
    });
    expect(login.status, JSON.stringify(login.body)).to.equal(200);
    return {
      appId,
      userId: made.userId,
      email,
      phone,
      bearer: String(login.body.access_token),
      auth: new SoftAuthenticator(),
    };
  }

  /** Creation options for the user's session. */
  async creationOptions(u: PasskeyUser): Promise<Json> {
    const r = await this.call("POST", "/v1/session/me/passkeys/options", { body: {}, bearer: u.bearer });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body.options as Json;
  }

  registerAnswer(u: PasskeyUser, credential: unknown): Promise<Answer> {
    return this.call("POST", "/v1/session/me/passkeys", { body: { credential }, bearer: u.bearer });
  }

  /** Registers a new passkey of the user's authenticator; its credential id. */
  async register(u: PasskeyUser, c: { counter?: number; userVerified?: boolean } = {}): Promise<string> {
    const credential = u.auth.create(await this.creationOptions(u), { origin: ORIGIN, ...c });
    const r = await this.registerAnswer(u, credential);
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return String(r.body.id);
  }

  async list(u: PasskeyUser): Promise<Json[]> {
    const r = await this.call("GET", "/v1/session/me/passkeys", { bearer: u.bearer });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body.passkeys as Json[];
  }

  /** Login options of an app: `{challenge_token, options}`. */
  async loginOptions(appId: string): Promise<{ challenge_token: string; options: Json }> {
    const r = await this.call("POST", "/v1/session/login/passkey/options", { body: { app_id: appId } });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body as unknown as { challenge_token: string; options: Json };
  }

  loginAnswer(challengeToken: unknown, credential: unknown, from?: string): Promise<Answer> {
    return this.call("POST", "/v1/session/login/passkey", {
      body: { challenge_token: challengeToken, credential },
      from,
    });
  }

  /** A whole passkey login of `appId`: fresh options, answered by `answer`. */
  async login(appId: string, answer: (options: Json) => Json, from?: string): Promise<Answer> {
    const { challenge_token, options } = await this.loginOptions(appId);
    return this.loginAnswer(challenge_token, answer(options), from);
  }

  /** The right answer of the user's authenticator (its first credential unless `credentialId`). */
  async loginAs(u: PasskeyUser, c: { credentialId?: string; userVerified?: boolean; from?: string } = {}) {
    return this.login(u.appId, (o) => u.auth.get(o, { origin: ORIGIN, ...c }), c.from);
  }

  /** The passkey as stored (counter, last use). */
  async stored(u: PasskeyUser, id: string): Promise<Passkey | undefined> {
    return this.store.get(u.userId, id);
  }

  /** How many sessions the user holds. */
  sessions(userId: string): Promise<number> {
    return this.app.registry.redis.zcard(this.app.registry.keys.key("sessions", userId));
  }

  /** The metrics now; `grew(...)` later tells how much a counter moved since. */
  async meter(): Promise<{ grew: (name: string, labels?: Record<string, string>) => Promise<number> }> {
    const before = await this.exposition();
    return {
      grew: async (name, labels = {}) =>
        sample(await this.exposition(), name, labels) - sample(before, name, labels),
    };
  }

  private async exposition(): Promise<string> {
    return (await this.app.registry.metrics.exposition()).body;
  }

  /** Subscribes `url` to the app's webhook `events`; the signing secret. */
  async subscribe(appId: string, mgmtKey: string, url: string, events: string[]): Promise<string> {
    const r = await this.call("POST", `/v2/session/apps/${appId}/webhooks`, {
      body: { url, events },
      bearer: mgmtKey,
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return String(r.body.secret);
  }

  stop(): Promise<boolean> {
    return this.app.stop();
  }
}

/** `ringfence_passkey_logins_total{use="login", outcome}`. */
export const LOGINS = "ringfence_passkey_logins_total";
export const REGISTRATIONS = "ringfence_passkey_registrations_total";

/**
 * A registration answer to `options` for a credential the authenticator holds already (its id
 * and key): what an authenticator that ignored `excludeCredentials` would send.
 */
export function createAgain(
  auth: SoftAuthenticator,
  credentialId: string,
  options: Json,
  origin = ORIGIN,
): Json {
  return auth.createAgain(credentialId, options, { origin });
}

/** A REST call of a test: method, path, JSON body, bearer token. */
export type Call = (method: string, path: string, body?: unknown, bearer?: string) => Promise<RestAnswer>;

/**
 * A user of `appId` holding a phone and an email unless told (numbered `n`), logged in by its
 * password (`passwordHash` is PASSWORD's), holding `passkeys` passkeys registered from `origin`.
 */
export async function passwordUser(o: {
  app: TestApp;
  appId: string;
  call: Call;
  n: number;
  passwordHash: string;
  origin: string;
  passkeys: number;
  has?: { phone?: boolean; email?: boolean };
}): Promise<{
  userId: string;
  phone: string;
  email: string;
  login: RestAnswer;
  access: string;
  auth: SoftAuthenticator;
  passkeys: string[];
}> {
  const phone = `+33${o.n}`;
  const email = `u${o.n}@example.com`;
  const ids = [
    ...(o.has?.phone === false ? [] : [{ type: "phone_number" as const, value: phone }]),
    ...(o.has?.email === false ? [] : [{ type: "email_address" as const, value: email }]),
  ];
  const created = await o.app.registry.users.create(o.appId, ids, o.passwordHash);
  if (created === undefined || ids[0] === undefined) throw new Error("no user made");
  const login = await o.call("POST", "/v1/session/login/password", {
    app_id: o.appId,
    identifier: ids[0],
    password: PASSWORD,
  });
  expect(login.status, login.text).to.equal(200);
  const access = String(login.body.access_token);
  const auth = new SoftAuthenticator();
  const passkeys: string[] = [];
  for (let i = 0; i < o.passkeys; i++) {
    const opts = await o.call("POST", "/v1/session/me/passkeys/options", {}, access);
    expect(opts.status, opts.text).to.equal(200);
    const credential = auth.create(opts.body.options as Json, { origin: o.origin });
    const reg = await o.call("POST", "/v1/session/me/passkeys", { credential }, access);
    expect(reg.status, reg.text).to.equal(201);
    passkeys.push(String(reg.body.id));
  }
  return { userId: created.userId, phone, email, login, access, auth, passkeys };
}

/** A sealed login challenge as the service's own would be, expiring at `expiresAtMs` (there is no clock to move). */
export function sealedLoginChallenge(
  secrets: { encrypt(plain: string): string },
  appId: string,
  challenge: string,
  expiresAtMs: number,
): string {
  return `pl_${secrets.encrypt(JSON.stringify({ p: "passkey-login", a: appId, c: challenge, e: expiresAtMs }))}`;
}

/** A deep copy of a credential JSON with `path` set to `value` (undefined removes it). */
export function withField(credential: Json, path: string, value: unknown): Json {
  const copy = structuredClone(credential);
  const parts = path.split(".");
  const last = parts.pop() ?? "";
  let at: Json = copy;
  for (const p of parts) at = at[p] as Json;
  if (value === undefined) Reflect.deleteProperty(at, last);
  else at[last] = value;
  return copy;
}
