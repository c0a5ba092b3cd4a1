import { randomBytes } from "node:crypto";
import { expect } from "chai";
import { Redis } from "ioredis";
import { compactVerify, createLocalJWKSet, decodeProtectedHeader } from "jose";
import { Secrets } from "../../src/crypto/secrets.js";
import { createLogger } from "../../src/log.js";
import { RedisSigningKeys } from "../../src/oauth/keys/signing-keys.js";
import { Keys } from "../../src/redis/client.js";
import { DelegationClient, type DelegationOptions, type HookRequest } from "../../src/stepup/delegation.js";
import { testRedisUrl } from "../support/hooks.js";
import { Peer, appKey, jwksServer, signBytes, signDecision, type AppKey } from "../support/stepup-hooks.js";

const REQUEST: HookRequest = {
  scope_requested: "svc:pwd:write",
  user_id: "usr_0123456789",
  identifiers: [{ type: "phone_number", value: "+33612345678" }],
  signals: { ip: "203.0.113.9", user_agent: "test" },
  metadata: { reason: "forgot password" },
};

const REVIEW = {
  status: "review",
  granted_for: 300,
  grant_mode: "single-use",
  steps: [{ order: 1, key: "verify_sms", expiration_duration: 120 }],
};

const BLOCK = { status: "block", grantedFor: 0, grantMode: "single-use", steps: [] };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("step-up delegation", () => {
  let redis: Redis;
  let keys: RedisSigningKeys;
  let app: AppKey;
  let hook: Peer;
  let jwks: Awaited<ReturnType<typeof jwksServer>>;
  let warnings: Record<string, unknown>[];

  before(async () => {
    redis = new Redis(testRedisUrl());
    keys = new RedisSigningKeys(
      redis,
      new Keys(`t${randomBytes(6).toString("hex")}:`),
      new Secrets(randomBytes(32)),
      { tokenLifetimeSeconds: 3600 },
    );
    app = await appKey();
  });

  after(async () => {
    await redis.quit();
  });

  beforeEach(async () => {
    hook = await Peer.start("/stepup-hook");
    jwks = await jwksServer([app]);
    warnings = [];
  });

  afterEach(async () => {
    await hook.close();
    await jwks.close();
  });

  function client(options: Partial<DelegationOptions> = {}): DelegationClient {
    const logger = createLogger("warn", (line) => warnings.push(JSON.parse(line) as Record<string, unknown>));
    return new DelegationClient({ keys, logger, ...options });
  }

  function answerSigned(
    payload: unknown,
    key: { kid: string; privateKey: AppKey["privateKey"] } = app,
  ): void {
    hook.answer = async () => ({ contentType: "application/jose", body: await signDecision(key, payload) });
  }

  const ask = (c: DelegationClient, request = REQUEST) => c.decide({ url: hook.url }, jwks.url, request);

  it("a decision signed by a key of the app's JWKS is returned", async () => {
    answerSigned(REVIEW);
    expect(await ask(client())).to.deep.equal({
      status: "review",
      grantedFor: 300,
      grantMode: "single-use",
      steps: [{ order: 1, key: "verify_sms", expirationDuration: 120 }],
    });
    expect(hook.calls).to.have.length(1);
    const call = hook.calls[0]!;
    expect(call.method).to.equal("POST");
    expect(call.headers["content-type"]).to.equal("application/json");
    expect(JSON.parse(call.body)).to.deep.equal(REQUEST);
    expect(warnings).to.deep.equal([]);
  });

  it("a continue with text/plain content type and no steps is returned", async () => {
    hook.answer = async () => ({
      contentType: "text/plain; charset=utf-8",
      body: `${await signDecision(app, { status: "continue", granted_for: 60, grant_mode: "session" })}\n`,
    });
    expect(await ask(client())).to.deep.equal({
      status: "continue",
      grantedFor: 60,
      grantMode: "session",
      steps: [],
    });
  });

  it("the hook can verify X-Webhook-Signature with the service's JWKS", async () => {
    answerSigned(REVIEW);
    await ask(client());
    const call = hook.calls[0]!;
    const signature = call.headers["x-webhook-signature"];
    expect(signature).to.be.a("string");
    const [header, detached, sig] = (signature as string).split(".");
    expect(detached).to.equal("");
    expect(decodeProtectedHeader(signature as string)).to.deep.equal({
      alg: "ES256",
      kid: (await keys.current()).kid,
      typ: "JOSE",
    });

    // What a hook does: put the raw body back in as the payload, verify with /.well-known/jwks.json.
    const serviceJwks = createLocalJWKSet(await keys.jwks());
    const attached = (body: string) => `${header!}.${Buffer.from(body).toString("base64url")}.${sig!}`;
    const { payload } = await compactVerify(attached(call.body), serviceJwks, { algorithms: ["ES256"] });
    expect(new TextDecoder().decode(payload)).to.equal(call.body);

    const tampered = call.body.replace("usr_0123456789", "usr_9876543210");
    let refused: unknown;
    await compactVerify(attached(tampered), serviceJwks).catch((err: unknown) => (refused = err));
    expect(refused).to.have.property("code", "ERR_JWS_SIGNATURE_VERIFICATION_FAILED");
  });

  it("a wrong signature gives block", async () => {
    const impostor = await appKey();
    answerSigned(REVIEW, { kid: app.kid, privateKey: impostor.privateKey });
    expect(await ask(client())).to.deep.equal(BLOCK);
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.include({ level: "warn", hook: hook.url, scope: "svc:pwd:write" });
    expect(warnings[0]!.reason).to.match(/ERR_JWS_SIGNATURE_VERIFICATION_FAILED/);
    // A known kid with a bad signature is not a reason to fetch the key set again.
    expect(jwks.calls).to.have.length(1);
  });

  it("a payload altered after signing gives block", async () => {
    const good = await signDecision(app, REVIEW);
    const [h, , s] = good.split(".");
    const forged = Buffer.from(JSON.stringify({ ...REVIEW, status: "continue", steps: [] })).toString(
      "base64url",
    );
    hook.answer = () => ({ contentType: "application/jose", body: `${h!}.${forged}.${s!}` });
    expect(await ask(client())).to.deep.equal(BLOCK);
  });

  it("an HMAC-signed decision gives block: only asymmetric algorithms are accepted", async () => {
    hook.answer = async () => ({
      contentType: "application/jose",
      body: await signDecision({ kid: app.kid, privateKey: randomBytes(32) }, REVIEW, "HS256"),
    });
    expect(await ask(client())).to.deep.equal(BLOCK);
    expect(warnings[0]!.reason).to.match(/ERR_JOSE_ALG_NOT_ALLOWED/);
  });

  it("a hook slower than 2 s gives block after 2 s", async () => {
    hook.answer = async () => ({
      contentType: "application/jose",
      body: await signDecision(app, REVIEW),
      delayMs: 3_000,
    });
    const started = Date.now();
    expect(await ask(client())).to.deep.equal(BLOCK);
    // Not sooner than 2 s; not later than the hook's 3 s either, or its review would have come.
    // No upper bound in time: a busy machine may take longer to hand back the block.
    expect(Date.now() - started).to.be.at.least(1_900);
    expect(warnings[0]!.reason).to.match(/did not answer in time/);
  });

  it("a JWKS slower than the rest of the 2 s gives block after 2 s", async () => {
    answerSigned(REVIEW);
    const serve = jwks.answer;
    jwks.answer = (call) => ({ ...(serve(call) as { body: string }), delayMs: 3_000 });
    const started = Date.now();
    expect(await ask(client())).to.deep.equal(BLOCK);
    // Not sooner than 2 s; not later than the JWKS's 3 s, or the hook's review would have passed.
    expect(Date.now() - started).to.be.at.least(1_900);
  });

  it("a 500 gives block, even with a signed body", async () => {
    const body = await signDecision(app, REVIEW);
    hook.answer = () => ({ status: 500, contentType: "application/jose", body });
    expect(await ask(client())).to.deep.equal(BLOCK);
    expect(warnings[0]!.reason).to.match(/answered 500/);
  });

  it("a redirect is not followed and gives block", async () => {
    const elsewhere = await Peer.start("/elsewhere");
    try {
      answerSigned(REVIEW);
      elsewhere.answer = hook.answer;
      hook.answer = () => ({ status: 307, headers: { location: elsewhere.url }, body: "" });
      expect(await ask(client())).to.deep.equal(BLOCK);
      expect(elsewhere.calls).to.have.length(0);
    } finally {
      await elsewhere.close();
    }
  });

  it("an unreachable hook gives block", async () => {
    const gone = await Peer.start("/gone");
    await gone.close();
    expect(await client().decide({ url: gone.url }, jwks.url, REQUEST)).to.deep.equal(BLOCK);
    expect(warnings[0]!.reason).to.match(/fetch failed/);
  });

  it("an unsigned JSON body gives block", async () => {
    const unsigned = JSON.stringify({ status: "continue", granted_for: 300, grant_mode: "single-use" });
    hook.answer = () => ({ contentType: "application/json", body: unsigned });
    expect(await ask(client())).to.deep.equal(BLOCK);
    hook.answer = () => ({ contentType: "text/plain", body: unsigned });
    expect(await ask(client())).to.deep.equal(BLOCK);
    expect(warnings).to.have.length(2);
  });

  const outOfBounds: [string, unknown][] = [
    ["granted_for above 86400", { ...REVIEW, granted_for: 86_401 }],
    ["granted_for negative", { ...REVIEW, granted_for: -1 }],
    ["an unknown status", { ...REVIEW, status: "allow" }],
    ["an unknown grant_mode", { ...REVIEW, grant_mode: "forever" }],
    ["a review without steps", { ...REVIEW, steps: [] }],
    ["a continue with steps", { ...REVIEW, status: "continue" }],
    [
      "an expiration_duration under 30 s",
      { ...REVIEW, steps: [{ order: 1, key: "verify_sms", expiration_duration: 5 }] },
    ],
    [
      "step orders with a gap",
      {
        ...REVIEW,
        steps: [
          { order: 1, key: "verify_sms", expiration_duration: 120 },
          { order: 3, key: "verify_sms", expiration_duration: 120 },
        ],
      },
    ],
    [
      "a verify_email step for a user without an email address",
      { ...REVIEW, steps: [{ order: 1, key: "verify_email", expiration_duration: 120 }] },
    ],
    ["a payload that is not JSON", "not json"],
  ];
  for (const [name, payload] of outOfBounds) {
    it(`a signed payload out of bounds gives block: ${name}`, async () => {
      if (typeof payload === "string") {
        hook.answer = async () => ({
          contentType: "application/jose",
          body: await signBytes(app, payload),
        });
      } else {
        answerSigned(payload);
      }
      expect(await ask(client())).to.deep.equal(BLOCK);
      expect(warnings).to.have.length(1);
    });
  }

  it("the JWKS is cached: several decisions fetch it once", async () => {
    answerSigned(REVIEW);
    const c = client();
    for (let i = 0; i < 3; i++) expect((await ask(c)).status).to.equal("review");
    expect(hook.calls).to.have.length(3);
    expect(jwks.calls).to.have.length(1);
  });

  it("the JWKS is fetched again once the cache has expired", async () => {
    answerSigned(REVIEW);
    const c = client({ jwksCacheMs: 200 });
    await ask(c);
    await sleep(250);
    expect((await ask(c)).status).to.equal("review");
    expect(jwks.calls).to.have.length(2);
  });

  it("an app key rotation (new kid) is picked up by exactly one JWKS re-fetch", async () => {
    const c = client({ jwksCooldownMs: 200 });
    answerSigned(REVIEW);
    await ask(c);
    expect(jwks.calls).to.have.length(1);

    const rotated = await appKey();
    jwks.keys = [rotated, app];
    answerSigned(REVIEW, rotated);
    await sleep(250);
    expect((await ask(c)).status).to.equal("review");
    expect(jwks.calls).to.have.length(2);
    expect((await ask(c)).status).to.equal("review");
    expect(jwks.calls).to.have.length(2);
  });

  it("an unknown kid re-fetches the JWKS at most once per cooldown, then gives block", async () => {
    const stranger = await appKey();
    answerSigned(REVIEW, stranger);
    const c = client({ jwksCooldownMs: 1_500 });
    // The first call fetches the set; it was just fetched, so no second fetch.
    expect(await ask(c)).to.deep.equal(BLOCK);
    expect(await ask(c)).to.deep.equal(BLOCK);
    expect(jwks.calls).to.have.length(1);
    await sleep(1_600);
    expect(await ask(c)).to.deep.equal(BLOCK);
    expect(await ask(c)).to.deep.equal(BLOCK);
    expect(jwks.calls).to.have.length(2);
    expect(warnings.map((w) => w.reason)).to.satisfy((rs: string[]) =>
      rs.every((r) => r.includes("ERR_JWKS_NO_MATCHING_KEY")),
    );
  });

  it("by default an unknown kid cannot make the JWKS be fetched more than once in a few seconds", async () => {
    const stranger = await appKey();
    answerSigned(REVIEW, stranger);
    const c = client();
    for (let i = 0; i < 5; i++) expect(await ask(c)).to.deep.equal(BLOCK);
    expect(jwks.calls).to.have.length(1);
  });
});
