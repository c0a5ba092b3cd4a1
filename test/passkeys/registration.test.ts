import { expect } from "chai";
import { decodeJwt } from "jose";
import {
  createAgain,
  ORIGIN,
  PASSWORD,
  PasskeyRig,
  REFUSED,
  REGISTRATIONS,
  RP_ID,
  sealedLoginChallenge,
  withField,
  type Answer,
  type PasskeyUser,
} from "../support/passkeys.js";
import { keysAddedSince, keysUnder } from "../support/redis.js";
import type { Json } from "../support/rest.js";
import { SoftAuthenticator } from "../support/webauthn.js";

/**
 * Passkey registration from a user session (docs/session-api.md#passkeys): creation options, the
 * registration and its refusals, the list and the removal, for apps whose relying party is set.
 */
describe("passkey registration (docs/session-api.md#passkeys)", () => {
  let rig: PasskeyRig;
  let appId: string;
  before(async () => {
    rig = await PasskeyRig.start();
    ({ appId } = await rig.newApp());
  });
  after(async () => {
    await rig.stop();
  });

  function expectBadField(r: Answer, field: string, what = field): void {
    expect(r.status, `${what}: ${JSON.stringify(r.body)}`).to.equal(400);
    expect(r.body, what).to.include({ code: "bad_request", field });
  }

  /** The ids the user holds, oldest first, and no credential id of `absent` owned by anyone. */
  async function expectHeld(u: PasskeyUser, ids: string[], absent: string[] = []): Promise<void> {
    expect((await rig.list(u)).map((p) => p.id)).to.deep.equal(ids);
    for (const id of absent) expect(await rig.store.ownerOf(id), `owner of ${id}`).to.equal(undefined);
  }

  it("answers every passkey call of an app without a relying party 400 passkeys_not_configured (docs/session-api.md#session-errors), writing nothing", async () => {
    const bare = await rig.newApp(null);
    const u = await rig.user(bare.appId);
    const prefix = rig.app.config.REDIS_KEY_PREFIX;
    const before = await keysUnder(rig.app.registry.redis, prefix);
    const someCredential = new SoftAuthenticator().create(
      { challenge: "AAAAAAAAAAAAAAAAAAAAAA", rp: { id: RP_ID }, user: { id: "dXNy" } },
      { origin: ORIGIN },
    );
    const sealed = sealedLoginChallenge(rig.app.registry.secrets, bare.appId, "AAAA", Date.now() + 60_000);
    const calls: [string, string, { body?: unknown; bearer?: string }][] = [
      ["POST", "/v1/session/me/passkeys/options", { body: {}, bearer: u.bearer }],
      ["POST", "/v1/session/me/passkeys", { body: { credential: someCredential }, bearer: u.bearer }],
      ["GET", "/v1/session/me/passkeys", { bearer: u.bearer }],
      ["DELETE", `/v1/session/me/passkeys/${String(someCredential.id)}`, { bearer: u.bearer }],
      ["POST", "/v1/session/login/passkey/options", { body: { app_id: bare.appId } }],
    ];
    for (const [method, path, o] of calls) {
      const r = await rig.call(method, path, o);
      expect(r.status, `${method} ${path}: ${JSON.stringify(r.body)}`).to.equal(400);
      expect(r.body.code, `${method} ${path}`).to.equal("passkeys_not_configured");
    }
    // A login answering a challenge of the app (sealed as the service seals them) meets the same answer.
    const login = await rig.loginAnswer(
      sealed,
      withField(someCredential, "response", {
        clientDataJSON: "AAAA",
        authenticatorData: "AAAA",
        signature: "AAAA",
      }),
    );
    expect(login.status, JSON.stringify(login.body)).to.equal(400);
    expect(login.body.code).to.equal("passkeys_not_configured");
    const added = await keysAddedSince(rig.app.registry.redis, prefix, before);
    // The login marked its challenge used (any attempt consumes it), and nothing else was written.
    expect(added.filter((k) => !k.startsWith(`${prefix}pkused:`))).to.deep.equal([]);
  });

  it("gives creation options: the app's RP ID, the user's id, a fresh challenge, a discoverable credential, no attestation, the user's passkeys excluded", async () => {
    const u = await rig.user(appId);
    const first = await rig.creationOptions(u);
    expect(first.rp).to.deep.include({ id: RP_ID });
    expect((first.rp as Json).name)
      .to.be.a("string")
      .and.not.equal("");
    const user = first.user as Json;
    expect(user.id).to.match(/^[A-Za-z0-9_-]+$/);
    expect(Buffer.from(String(user.id), "base64url").toString("utf8")).to.equal(u.userId);
    expect(user.name).to.equal(u.email);
    expect(first.challenge).to.match(/^[A-Za-z0-9_-]{22,}$/);
    expect(first.authenticatorSelection).to.deep.include({
      residentKey: "required",
      userVerification: "preferred",
    });
    expect(first.attestation).to.equal("none");
    expect((first.pubKeyCredParams as Json[]).map((p) => p.alg)).to.deep.equal([-7, -8, -257]);
    expect(first.timeout).to.equal(300_000);
    expect(first.excludeCredentials).to.deep.equal([]);

    const ids = [await rig.register(u), await rig.register(u)];
    const next = await rig.creationOptions(u);
    expect(next.challenge).to.not.equal(first.challenge);
    expect((next.excludeCredentials as Json[]).map((c) => [c.id, c.type])).to.deep.equal(
      ids.map((id) => [id, "public-key"]),
    );
  });

  it("registers passkeys (201 {id, created_at}) and lists them oldest first, last_used_at only once one logged in", async () => {
    const u = await rig.user(appId);
    const m = await rig.meter();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const credential = u.auth.create(await rig.creationOptions(u), { origin: ORIGIN });
      const r = await rig.registerAnswer(u, credential);
      expect(r.status, JSON.stringify(r.body)).to.equal(201);
      expect(Object.keys(r.body).sort()).to.deep.equal(["created_at", "id"]);
      expect(r.body.id).to.equal(credential.id);
      expect(Date.parse(String(r.body.created_at))).to.be.closeTo(Date.now(), 10_000);
      ids.push(String(r.body.id));
    }
    expect(await m.grew(REGISTRATIONS, { outcome: "success" })).to.equal(3);
    const listed = await rig.list(u);
    expect(listed.map((p) => p.id)).to.deep.equal(ids);
    for (const p of listed) expect(Object.keys(p).sort()).to.deep.equal(["created_at", "id"]);
    const created = listed.map((p) => String(p.created_at));
    expect([...created].sort()).to.deep.equal(created);

    const logged = await rig.loginAs(u, { credentialId: ids[1] });
    expect(logged.status, JSON.stringify(logged.body)).to.equal(200);
    const after = await rig.list(u);
    expect(after.map((p) => p.id)).to.deep.equal(ids);
    expect(after[0]).to.not.have.property("last_used_at");
    expect(after[2]).to.not.have.property("last_used_at");
    expect(after[1]).to.include({ id: ids[1], created_at: created[1] });
    expect(Date.parse(String(after[1]?.last_used_at))).to.be.closeTo(Date.now(), 10_000);
  });

  it("deletes a passkey (204), which then logs in no more; an id the user does not hold is 404 not_found and removes nothing", async () => {
    const a = await rig.user(appId);
    const b = await rig.user(appId);
    const [first, second] = [await rig.register(a), await rig.register(a)];
    const ofB = await rig.register(b);
    const del = (u: PasskeyUser, id: string) =>
      rig.call("DELETE", `/v1/session/me/passkeys/${encodeURIComponent(id)}`, { bearer: u.bearer });

    for (const id of [ofB, "bm90LWEtcGFzc2tleQ"]) {
      const r = await del(a, id);
      expect(r.status, JSON.stringify(r.body)).to.equal(404);
      expect(r.body.code).to.equal("not_found");
    }
    await expectHeld(a, [first, second]);
    await expectHeld(b, [ofB]);
    expect(await rig.store.ownerOf(ofB)).to.equal(b.userId);
    expect((await rig.loginAs(b)).status, "b's passkey still logs in").to.equal(200);

    const removed = await del(a, first);
    expect(removed.status, JSON.stringify(removed.body)).to.equal(204);
    await expectHeld(a, [second], [first]);
    const refused = await rig.loginAs(a, { credentialId: first });
    expect(refused.status).to.equal(401);
    expect(refused.body).to.deep.equal(REFUSED);
    expect((await rig.loginAs(a, { credentialId: second })).status, "the other passkey").to.equal(200);
    expect((await del(a, first)).status, "a second removal").to.equal(404);

    // Its id is free again: the same authenticator may register it anew.
    const again = await rig.registerAnswer(a, createAgain(a.auth, first, await rig.creationOptions(a)));
    expect(again.status, JSON.stringify(again.body)).to.equal(201);
    await expectHeld(a, [second, first]);
  });

  describe("refusals", () => {
    it("answers 400 expired_challenge without a pending challenge, to a second answer of one challenge, and to another session's challenge", async () => {
      const u = await rig.user(appId);
      const m = await rig.meter();
      const before = new SoftAuthenticator().create(
        { challenge: "AAAAAAAAAAAAAAAAAAAAAA", rp: { id: RP_ID }, user: { id: "dXNy" } },
        { origin: ORIGIN },
      );
      const none = await rig.registerAnswer(u, before);
      expect(none.status, JSON.stringify(none.body)).to.equal(400);
      expect(none.body.code).to.equal("expired_challenge");

      // Answered once, right: a second credential on the same challenge finds none pending.
      const options = await rig.creationOptions(u);
      expect((await rig.registerAnswer(u, u.auth.create(options, { origin: ORIGIN }))).status).to.equal(201);
      const second = u.auth.create(options, { origin: ORIGIN });
      const twice = await rig.registerAnswer(u, second);
      expect(twice.status).to.equal(400);
      expect(twice.body.code).to.equal("expired_challenge");

      // Answered once, wrong: the challenge is taken all the same.
      const next = await rig.creationOptions(u);
      const wrong = await rig.registerAnswer(
        u,
        u.auth.create(next, { origin: "https://elsewhere.example.org" }),
      );
      expectBadField(wrong, "credential", "the wrong origin");
      const late = await rig.registerAnswer(u, u.auth.create(next, { origin: ORIGIN }));
      expect(late.status).to.equal(400);
      expect(late.body.code).to.equal("expired_challenge");

      // The challenge is the session's: another session of the user has none pending.
      const otherSession = await rig.call("POST", "/v1/session/login/password", {
        body: { app_id: appId, identifier: { type: "email_address", value: u.email }, password: PASSWORD },
      });
      const other = { ...u, bearer: String(otherSession.body.access_token) };
      const mine = await rig.creationOptions(u);
      const fromOther = await rig.registerAnswer(other, u.auth.create(mine, { origin: ORIGIN }));
      expect(fromOther.body.code).to.equal("expired_challenge");
      expect((await rig.registerAnswer(u, u.auth.create(mine, { origin: ORIGIN }))).status).to.equal(201);

      expect(await m.grew(REGISTRATIONS, { outcome: "expired_challenge" })).to.equal(4);
      expect(await m.grew(REGISTRATIONS, { outcome: "invalid_credential" })).to.equal(1);
      expect((await rig.list(u)).map((p) => p.id)).to.have.length(2);
    });

    it("refuses a credential that does not verify (wrong origin, RP ID or challenge, or a replaced challenge) with 400 naming credential, storing nothing", async () => {
      const u = await rig.user(appId);
      const m = await rig.meter();
      const refusedIds: string[] = [];
      const cases: [string, (o: Json) => Json][] = [
        ["an origin not listed", (o) => u.auth.create(o, { origin: "https://other.example.com" })],
        ["http on the RP ID", (o) => u.auth.create(o, { origin: "http://login.example.com" })],
        ["another RP ID", (o) => u.auth.create(o, { origin: ORIGIN, rpId: "example.org" })],
        [
          "another challenge",
          (o) => u.auth.create({ ...o, challenge: "c29tZS1vdGhlci1jaGFsbGVuZ2U" }, { origin: ORIGIN }),
        ],
      ];
      for (const [what, make] of cases) {
        const credential = make(await rig.creationOptions(u));
        refusedIds.push(String(credential.id));
        expectBadField(await rig.registerAnswer(u, credential), "credential", what);
      }
      // A new options call replaces the session's challenge: an answer to the earlier one fails.
      const earlier = await rig.creationOptions(u);
      await rig.creationOptions(u);
      const stale = u.auth.create(earlier, { origin: ORIGIN });
      refusedIds.push(String(stale.id));
      expectBadField(await rig.registerAnswer(u, stale), "credential", "a replaced challenge");

      await expectHeld(u, [], refusedIds);
      expect(await m.grew(REGISTRATIONS, { outcome: "invalid_credential" })).to.equal(5);
      expect(await m.grew(REGISTRATIONS, { outcome: "success" })).to.equal(0);
      // The listed origins all register.
      for (const origin of ["https://example.com", ORIGIN]) {
        expect(
          (await rig.registerAnswer(u, u.auth.create(await rig.creationOptions(u), { origin }))).status,
        ).to.equal(201);
      }
    });

    it("refuses a JSON id that is not the id of the credential the authenticator made: 400 naming credential.id, storing nothing", async () => {
      const u = await rig.user(appId);
      const made = u.auth.create(await rig.creationOptions(u), { origin: ORIGIN });
      const forged = { ...made, id: "c29tZXRoaW5nLWVsc2U", rawId: "c29tZXRoaW5nLWVsc2U" };
      expectBadField(await rig.registerAnswer(u, forged), "credential.id", "another id in the JSON");
      await expectHeld(u, [], [String(made.id), forged.id]);
    });

    it("refuses a credential id registered already, 400 naming credential.id: the user's own again, or another user's", async () => {
      const a = await rig.user(appId);
      const b = await rig.user(appId);
      const id = await rig.register(a);
      const m = await rig.meter();
      expectBadField(
        await rig.registerAnswer(a, createAgain(a.auth, id, await rig.creationOptions(a))),
        "credential.id",
        "the user's own credential again",
      );
      expectBadField(
        await rig.registerAnswer(b, createAgain(a.auth, id, await rig.creationOptions(b))),
        "credential.id",
        "another user's credential",
      );
      expect(await m.grew(REGISTRATIONS, { outcome: "taken" })).to.equal(2);
      await expectHeld(a, [id]);
      await expectHeld(b, []);
      expect(await rig.store.ownerOf(id)).to.equal(a.userId);
      const logged = await rig.loginAs(a);
      expect(logged.status).to.equal(200);
      expect(decodeJwt(String(logged.body.access_token)).sub).to.equal(a.userId);
    });

    it("keeps at most 20 passkeys per user: the 21st is 400 naming credential and stored nowhere", async function () {
      this.timeout(60_000);
      const u = await rig.user(appId);
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push(await rig.register(u));
      const m = await rig.meter();
      const extra = u.auth.create(await rig.creationOptions(u), { origin: ORIGIN });
      expectBadField(await rig.registerAnswer(u, extra), "credential", "a 21st passkey");
      expect(await m.grew(REGISTRATIONS, { outcome: "too_many" })).to.equal(1);
      await expectHeld(u, ids, [String(extra.id)]);
      // One removed, one more fits.
      expect(
        (await rig.call("DELETE", `/v1/session/me/passkeys/${ids[0]}`, { bearer: u.bearer })).status,
      ).to.equal(204);
      ids.push(await rig.register(u));
      expect(await rig.list(u)).to.have.length(20);
    });

    it("refuses a malformed credential with 400 naming the field, storing nothing and keeping the challenge", async () => {
      const u = await rig.user(appId);
      const options = await rig.creationOptions(u);
      const good = u.auth.create(options, { origin: ORIGIN });
      const m = await rig.meter();
      const cases: [string, unknown][] = [
        ["credential", null],
        ["credential.id", withField(good, "id", undefined)],
        ["credential.id", withField(good, "id", "")],
        ["credential.id", withField(good, "id", 7)],
        ["credential.rawId", withField(good, "rawId", undefined)],
        ["credential.rawId", withField(good, "rawId", "b3RoZXItaWQ")],
        ["credential.type", withField(good, "type", "password")],
        ["credential.type", withField(good, "type", undefined)],
        ["credential.response", withField(good, "response", undefined)],
        ["credential.response", withField(good, "response", "text")],
        ["credential.response.clientDataJSON", withField(good, "response.clientDataJSON", undefined)],
        ["credential.response.clientDataJSON", withField(good, "response.clientDataJSON", "not base64url!")],
        ["credential.response.clientDataJSON", withField(good, "response.clientDataJSON", 42)],
        ["credential.response.attestationObject", withField(good, "response.attestationObject", undefined)],
        ["credential.response.attestationObject", withField(good, "response.attestationObject", true)],
        ["credential.response.transports", withField(good, "response.transports", "internal")],
        ["credential.authenticatorAttachment", withField(good, "authenticatorAttachment", "usb")],
      ];
      for (const [field, credential] of cases) {
        expectBadField(
          await rig.registerAnswer(u, credential),
          field,
          `${field} of ${JSON.stringify(credential).slice(0, 80)}`,
        );
      }
      // No credential at all.
      expectBadField(
        await rig.call("POST", "/v1/session/me/passkeys", { body: {}, bearer: u.bearer }),
        "credential",
      );
      // Not an object: the gateway's JSON decoding refuses it before the service, naming it in the message only.
      for (const credential of ["text", 42, []]) {
        const r = await rig.registerAnswer(u, credential);
        expect(r.status, JSON.stringify(r.body)).to.equal(400);
        expect(r.body.code).to.equal("bad_request");
        expect(String(r.body.message)).to.include('"credential"');
      }
      await expectHeld(u, [], [String(good.id)]);
      for (const outcome of ["success", "invalid_credential", "expired_challenge", "taken", "too_many"]) {
        expect(await m.grew(REGISTRATIONS, { outcome }), outcome).to.equal(0);
      }
      // Bad input took no challenge: the right answer to it registers.
      const r = await rig.registerAnswer(u, good);
      expect(r.status, JSON.stringify(r.body)).to.equal(201);
      await expectHeld(u, [String(good.id)]);
    });
  });
});
