import { expect } from "chai";
import * as oauth from "oauth4webapi";
import { decodeJwt } from "jose";
import { signAccessToken } from "../../src/oauth/keys/signing-keys.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { keysUnder } from "../support/redis.js";
import {
  discover,
  newApp,
  newClient,
  serverToken,
  sessionToken,
  tokenCall,
  type AppCreds,
  type ClientCreds,
} from "../support/oauth-clients.js";

describe("token revocation (RFC 7009)", () => {
  let app: TestApp;
  let owner: AppCreds;
  let c: ClientCreds;
  // Few enough that a test can fill them; the other oauth tests run with the limits off.
  const limits = { TOKEN_FAILURES_CLIENT: "4/300", TOKEN_FAILURES_IP: "1000/300" };

  before(async function () {
    this.timeout(30_000);
    app = await startTestApp(limits);
    owner = await newApp(app);
    c = await newClient(app, owner);
  });
  after(async () => {
    await app.stop();
  });

  const active = async (token: string, who: ClientCreds = c) =>
    (await tokenCall(app, "introspect", { token }, who)).body.active;

  async function expectEmpty200(token: string, who: ClientCreds = c) {
    const r = await tokenCall(app, "revoke", { token, token_type_hint: "access_token" }, who);
    expect(r.status, r.text).to.equal(200);
    expect(r.text).to.equal("");
    expect(r.headers.get("cache-control")).to.equal("no-store");
  }

  it("revokes a server token with oauth4webapi: introspection then says inactive, until its exp", async () => {
    const token = await serverToken(app, c);
    const keep = await serverToken(app, c);
    expect(await active(token)).to.equal(true);
    const as = await discover(app);
    const res = await oauth.revocationRequest(
      as,
      { client_id: c.clientId },
      oauth.ClientSecretBasic(c.secret),
      token,
      {
        [oauth.allowInsecureRequests]: true,
      },
    );
    expect(res.headers.get("cache-control")).to.equal("no-store");
    await oauth.processRevocationResponse(res);
    expect(await active(token)).to.equal(false);
    // Another token of the client is not touched.
    expect(await active(keep)).to.equal(true);
    // The denylist entry lasts exactly as long as the token would have.
    const { jti, exp } = decodeJwt(token);
    const revoked = [...(await keysUnder(app.registry.redis, app.config.REDIS_KEY_PREFIX))].find((k) =>
      k.endsWith(`:revoked:${String(jti)}`),
    );
    expect(revoked).to.be.a("string");
    expect(await app.registry.redis.call("EXPIRETIME", revoked ?? "")).to.equal(exp);
    // Revoking again is still 200, nothing more.
    await expectEmpty200(token);
  });

  /** A revocation refused as RFC 7009 section 2.1 says: 400 invalid_request, no-store. */
  async function expectRefused(token: string, who: ClientCreds = c) {
    const r = await tokenCall(app, "revoke", { token }, who);
    expect(r.status, r.text).to.equal(400);
    expect(r.body).to.deep.equal({
      error: "invalid_request",
      error_description: "a client may revoke only the tokens issued to it",
    });
    expect(r.headers.get("cache-control")).to.equal("no-store");
  }

  const revokedKeys = async () =>
    [...(await keysUnder(app.registry.redis, app.config.REDIS_KEY_PREFIX))].filter((k) =>
      k.includes(":revoked:"),
    );

  it("refuses a token of another client, of this app or another, with 400 invalid_request and revokes nothing; an unknown one is still 200", async () => {
    const sibling = await newClient(app, owner);
    const siblings = await serverToken(app, sibling);
    const elsewhere = await newApp(app, "Elsewhere");
    const theirs = await newClient(app, elsewhere);
    const theirToken = await serverToken(app, theirs);
    const before = await revokedKeys();
    await expectRefused(siblings);
    await expectRefused(theirToken);
    // oauth4webapi reads the refusal as the RFC's error.
    const as = await discover(app);
    const res = await oauth.revocationRequest(
      as,
      { client_id: c.clientId },
      oauth.ClientSecretBasic(c.secret),
      siblings,
      {
        [oauth.allowInsecureRequests]: true,
      },
    );
    const refused = await oauth.processRevocationResponse(res).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).to.be.instanceOf(oauth.ResponseBodyError);
    expect((refused as oauth.ResponseBodyError).error).to.equal("invalid_request");
    // A token this service does not take is answered as a revoked one is (RFC 7009 section 2.2).
    const now = Math.floor(Date.now() / 1000);
    const expired = await signAccessToken(app.registry.signingKeys, {
      ...decodeJwt(siblings),
      jti: crypto.randomUUID(),
      iat: now - 7200,
      exp: now - 3600,
    });
    for (const token of ["not a token", "rt_usr_x.y.z", "x".repeat(9000), expired]) {
      await expectEmpty200(token);
    }
    expect(await revokedKeys()).to.deep.equal(before);
    expect(await active(siblings)).to.equal(true);
    expect(await active(theirToken, theirs)).to.equal(true);
  });

  it("refuses a user's session token with 400 invalid_request: the session and its tokens live on", async () => {
    const s = await sessionToken(app, owner.appId);
    const elsewhere = await newApp(app, "Other shop");
    const theirSession = await sessionToken(app, elsewhere.appId);
    const theirs = await newClient(app, elsewhere);
    await expectRefused(s.token);
    await expectRefused(theirSession.token);
    expect(await active(s.token)).to.equal(true);
    expect(await active(theirSession.token, theirs)).to.equal(true);
    expect(await app.registry.sessions.alive(s.userId, s.sessionId)).to.equal(true);
    expect(await app.registry.sessions.alive(theirSession.userId, theirSession.sessionId)).to.equal(true);
  });

  it("refuses a missing token with 400 invalid_request, and a wrong client with 401 invalid_client, revoking nothing", async () => {
    const token = await serverToken(app, c);
    const missing = await tokenCall(app, "revoke", {}, c);
    expect([missing.status, missing.body.error]).to.deep.equal([400, "invalid_request"]);
    expect(String(missing.body.error_description)).to.include("token");
    const other = await newClient(app, owner);
    const wrong = await tokenCall(app, "revoke", { token }, { clientId: c.clientId, secret: other.secret });
    expect([wrong.status, wrong.body.error]).to.deep.equal([401, "invalid_client"]);
    expect(await active(token)).to.equal(true);
  });

  it("counts wrong secrets at introspection and revocation in the token endpoint's windows", async () => {
    const victim = await newClient(app, owner);
    const wrong = { ...victim, secret: "rfs_wrong" };
    const statuses: number[] = [];
    // TOKEN_FAILURES_CLIENT is 4: two at each endpoint fill the client's window.
    for (const endpoint of ["introspect", "revoke", "introspect", "revoke"] as const) {
      statuses.push((await tokenCall(app, endpoint, { token: "x" }, wrong)).status);
    }
    expect(statuses).to.deep.equal([401, 401, 401, 401]);
    // The window is full at every endpoint that authenticates a client: no more guesses anywhere.
    for (const endpoint of ["token", "introspect", "revoke"] as const) {
      const form: Record<string, string> =
        endpoint === "token" ? { grant_type: "client_credentials" } : { token: "x" };
      const r = await tokenCall(app, endpoint, form, wrong);
      expect(r.status, `${endpoint}: ${r.text}`).to.equal(429);
      expect(Number(r.headers.get("retry-after"))).to.be.above(0);
    }
    // The right secret is still served (decisions 8.1), here as at the token endpoint.
    const token = await serverToken(app, victim);
    expect(await active(token, victim)).to.equal(true);
  });

  it("refuses a guess past the window filled at the token endpoint", async () => {
    const victim = await newClient(app, owner);
    const wrong = { ...victim, secret: "rfs_wrong" };
    for (let i = 0; i < 4; i++) {
      const r = await tokenCall(app, "token", { grant_type: "client_credentials" }, wrong);
      expect(r.status).to.equal(401);
    }
    for (const endpoint of ["introspect", "revoke"] as const) {
      expect((await tokenCall(app, endpoint, { token: "x" }, wrong)).status).to.equal(429);
    }
  });
});
