import { expect } from "chai";
import { startTestApp, type TestApp } from "../support/app.js";
import { rest } from "../support/rest.js";
import { waitFor } from "../support/redis.js";
import {
  newApp,
  newClient,
  serverToken,
  tokenCall,
  type AppCreds,
  type ClientCreds,
} from "../support/oauth-clients.js";

describe("client secret rotation", () => {
  let a: TestApp;
  let b: TestApp;
  let owner: AppCreds;

  before(async function () {
    this.timeout(30_000);
    a = await startTestApp();
    // A second instance on the same data: its kept readings of a client must follow a rotation.
    b = await startTestApp({ REDIS_KEY_PREFIX: a.config.REDIS_KEY_PREFIX });
    owner = await newApp(a);
  });
  after(async () => {
    await b.stop();
    await a.stop();
  });

  const rotate = (clientId: string, body: unknown, who: AppCreds = owner, key: string = who.key) =>
    rest(a.baseUrl).call("POST", `/v2/session/apps/${who.appId}/oauth/clients/${clientId}/secret`, {
      body,
      bearer: key,
    });
  const tokenStatus = async (app: TestApp, c: ClientCreds) =>
    (await tokenCall(app, "token", { grant_type: "client_credentials" }, c)).status;

  it("gives a new secret that works at once everywhere, and ends the old one at once without grace", async () => {
    const c = await newClient(a, owner);
    // Both instances keep a reading of the client with the old secret.
    expect([await tokenStatus(a, c), await tokenStatus(b, c)]).to.deep.equal([200, 200]);
    const r = await rotate(c.clientId, {});
    expect(r.status, r.text).to.equal(200);
    expect(r.headers.get("cache-control")).to.equal("no-store");
    expect(Object.keys(r.body).sort()).to.deep.equal(["client_id", "client_secret"]);
    expect(r.body.client_id).to.equal(c.clientId);
    const next = { clientId: c.clientId, secret: String(r.body.client_secret) };
    expect(next.secret).to.match(/^rfs_/).and.not.equal(c.secret);
    for (const app of [a, b]) {
      expect(await tokenStatus(app, next)).to.equal(200);
      expect(await tokenStatus(app, c)).to.equal(401);
      expect((await tokenCall(app, "introspect", { token: "x" }, c)).status).to.equal(401);
    }
    // Tokens issued before the rotation stay active.
    expect(
      (await tokenCall(a, "introspect", { token: await serverToken(a, next) }, next)).body.active,
    ).to.equal(true);
  });

  it("keeps the old secret working for grace_seconds, at every endpoint, then refuses it", async () => {
    const c = await newClient(a, owner);
    expect(await tokenStatus(b, c)).to.equal(200);
    const grace = 3;
    const startedAt = Date.now();
    const r = await rotate(c.clientId, { grace_seconds: grace });
    expect(r.status, r.text).to.equal(200);
    const next = { clientId: c.clientId, secret: String(r.body.client_secret) };
    for (const app of [a, b]) {
      expect(await tokenStatus(app, next)).to.equal(200);
      expect(await tokenStatus(app, c)).to.equal(200);
      const token = await serverToken(app, c);
      expect((await tokenCall(app, "introspect", { token }, c)).body.active).to.equal(true);
    }
    // The grace is the only timing here: wait until the old secret is refused.
    await waitFor(async () => (await tokenStatus(b, c)) === 401, 10_000);
    expect(Date.now() - startedAt).to.be.at.least(grace * 1000);
    await waitFor(async () => (await tokenStatus(a, c)) === 401, 10_000);
    expect((await tokenCall(a, "revoke", { token: "x" }, c)).status).to.equal(401);
    expect([await tokenStatus(a, next), await tokenStatus(b, next)]).to.deep.equal([200, 200]);
  });

  it("drops the secret kept from an earlier rotation at the next one", async () => {
    const c = await newClient(a, owner);
    const first = await rotate(c.clientId, { grace_seconds: 3600 });
    const second = await rotate(c.clientId, { grace_seconds: 3600 });
    const one = { clientId: c.clientId, secret: String(first.body.client_secret) };
    const two = { clientId: c.clientId, secret: String(second.body.client_secret) };
    expect(await tokenStatus(a, c)).to.equal(401);
    expect([await tokenStatus(a, one), await tokenStatus(a, two)]).to.deep.equal([200, 200]);
  });

  for (const [what, grace] of [
    ["a negative grace", -1],
    ["a grace over a day", 86_401],
  ] as const) {
    it(`refuses ${what} with 400 naming grace_seconds, changing nothing`, async () => {
      const c = await newClient(a, owner);
      const r = await rotate(c.clientId, { grace_seconds: grace });
      expect(r.status, r.text).to.equal(400);
      expect(String(r.body.message)).to.include("grace_seconds");
      expect(await tokenStatus(a, c)).to.equal(200);
    });
  }

  it("answers 404 for a client of another app or none, and 401 without the app's key", async () => {
    const c = await newClient(a, owner);
    const elsewhere = await newApp(a, "Elsewhere");
    expect((await rotate(c.clientId, {}, owner, elsewhere.key)).status).to.equal(401);
    expect((await rotate(c.clientId, {}, elsewhere)).status).to.equal(404);
    const theirs = await newClient(a, elsewhere);
    expect((await rotate(theirs.clientId, {})).status).to.equal(404);
    expect((await rotate("rfc_AAAAAAAAAAAAAAAAAAAAAA", {})).status).to.equal(404);
    const anonymous = await rest(a.baseUrl).call(
      "POST",
      `/v2/session/apps/${owner.appId}/oauth/clients/${c.clientId}/secret`,
      { body: {} },
    );
    expect(anonymous.status).to.equal(401);
    expect([await tokenStatus(a, c), await tokenStatus(a, theirs)]).to.deep.equal([200, 200]);
  });
});
