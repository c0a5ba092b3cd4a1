import { expect } from "chai";
import { randomUUID } from "node:crypto";
import * as oauth from "oauth4webapi";
import { calculateJwkThumbprint, decodeJwt, exportJWK, generateKeyPair, SignJWT } from "jose";
import { Redis } from "ioredis";
import { status } from "@grpc/grpc-js";
import { insecure, metadata, startTestApp, unary, type TestApp } from "../support/app.js";
import { basicAuth, rest } from "../support/rest.js";
import { OAuthServiceClient } from "../../src/gen/ringfence/oauth/v1/oauth_service.js";
import { startRedisRelay } from "../support/redis.js";
import { testRedisUrl } from "../support/hooks.js";
import { signAccessToken } from "../../src/oauth/keys/signing-keys.js";
import { issueSessionToken } from "../../src/session/tokens.js";
import { newJti } from "../../src/session/sessions.js";
import { ClientStore } from "../../src/oauth/clients.js";
import { Keys } from "../../src/redis/client.js";
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
import { PWD } from "../support/stepup.js";

describe("token introspection (RFC 7662)", () => {
  let app: TestApp;
  let owner: AppCreds;
  let c: ClientCreds;

  before(async function () {
    this.timeout(30_000);
    app = await startTestApp();
    owner = await newApp(app);
    c = await newClient(app, owner);
  });
  after(async () => {
    await app.stop();
  });

  const introspect = (token: string, who: ClientCreds | null = c, extra: Record<string, string> = {}) =>
    tokenCall(app, "introspect", { token, ...extra }, who);

  async function expectInactive(token: string, who: ClientCreds = c) {
    const r = await introspect(token, who);
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.deep.equal({ active: false });
    expect(r.headers.get("cache-control")).to.equal("no-store");
  }

  it("publishes the endpoints in the metadata, with the token endpoint's authentication methods", async () => {
    const as = await discover(app);
    const issuer = app.config.ISSUER_URL;
    expect(as.introspection_endpoint).to.equal(`${issuer}/v1/session/oauth/introspect`);
    expect(as.revocation_endpoint).to.equal(`${issuer}/v1/session/oauth/revoke`);
    expect(as.introspection_endpoint_auth_methods_supported).to.deep.equal(
      as.token_endpoint_auth_methods_supported,
    );
    expect(as.revocation_endpoint_auth_methods_supported).to.deep.equal(
      as.token_endpoint_auth_methods_supported,
    );
  });

  it("introspects a DPoP-bound token as token_type DPoP with its cnf.jkt (oauth4webapi's DPoP handle)", async () => {
    const as = await discover(app);
    const client: oauth.Client = { client_id: c.clientId };
    const keyPair = await generateKeyPair("ES256", { extractable: true });
    const granted = await oauth.processClientCredentialsResponse(
      as,
      client,
      await oauth.clientCredentialsGrantRequest(
        as,
        client,
        oauth.ClientSecretBasic(c.secret),
        new URLSearchParams({ scope: "billing:read" }),
        { DPoP: oauth.DPoP(client, keyPair), [oauth.allowInsecureRequests]: true },
      ),
    );
    const res = await oauth.introspectionRequest(
      as,
      client,
      oauth.ClientSecretBasic(c.secret),
      granted.access_token,
      {
        [oauth.allowInsecureRequests]: true,
      },
    );
    const answer = await oauth.processIntrospectionResponse(as, client, res);
    const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey), "sha256");
    expect(answer).to.include({ active: true, token_type: "DPoP" });
    expect(answer.cnf).to.deep.equal({ jkt });
  });

  for (const method of ["client_secret_basic", "client_secret_post"] as const) {
    it(`introspects an active server token with oauth4webapi (${method}), every field of the decision`, async () => {
      const token = await serverToken(app, c);
      const as = await discover(app);
      // A client authenticates only by the method it registered: each method has its client.
      const who = method === "client_secret_basic" ? c : await newClient(app, owner, undefined, method);
      const auth =
        method === "client_secret_basic"
          ? oauth.ClientSecretBasic(who.secret)
          : oauth.ClientSecretPost(who.secret);
      const res = await oauth.introspectionRequest(as, { client_id: who.clientId }, auth, token, {
        [oauth.allowInsecureRequests]: true,
        additionalParameters: { token_type_hint: "access_token" },
      });
      expect(res.headers.get("cache-control")).to.equal("no-store");
      const answer = await oauth.processIntrospectionResponse(as, { client_id: who.clientId }, res);
      const claims = decodeJwt(token);
      expect(answer).to.deep.equal({
        active: true,
        scope: "billing:read",
        client_id: c.clientId,
        sub: c.clientId,
        exp: claims.exp,
        iat: claims.iat,
        iss: app.config.ISSUER_URL,
        aud: owner.appId,
        jti: claims.jti,
        token_type: "Bearer",
        app_id: owner.appId,
      });
    });
  }

  it("answers a token of another client of the same app as active", async () => {
    const other = await newClient(app, owner);
    const token = await serverToken(app, other);
    const r = await introspect(token);
    expect(r.body).to.include({ active: true, client_id: other.clientId });
  });

  it("answers {active: false} alone for a malformed, forged, foreign or expired token", async () => {
    const token = await serverToken(app, c);
    const [head, body, sig] = token.split(".");
    const forgedBody = Buffer.from(
      JSON.stringify({ ...decodeJwt(token), scope: "billing:read billing:write" }),
    ).toString("base64url");
    const { privateKey } = await generateKeyPair("ES256");
    const foreign = await new SignJWT({ ...decodeJwt(token) })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "someone-else" })
      .sign(privateKey);
    const now = Math.floor(Date.now() / 1000);
    const expired = await signAccessToken(app.registry.signingKeys, {
      ...decodeJwt(token),
      jti: randomUUID(),
      iat: now - 7200,
      exp: now - 3600,
    });
    const unsigned = `${Buffer.from(JSON.stringify({ alg: "none", typ: "at+jwt" })).toString("base64url")}.${body}.`;
    for (const bad of [
      "not a token",
      `${head}.${forgedBody}.${sig}`,
      foreign,
      expired,
      unsigned,
      "x".repeat(9000),
    ]) {
      await expectInactive(bad);
    }
  });

  it("answers a token of another app as inactive", async () => {
    const elsewhere = await newApp(app, "Elsewhere");
    const theirs = await newClient(app, elsewhere);
    const token = await serverToken(app, theirs);
    await expectInactive(token);
    // Its own client sees it active.
    expect((await introspect(token, theirs)).body).to.include({ active: true });
  });

  it("answers a token of a deleted client as inactive", async () => {
    const doomed = await newClient(app, owner);
    const token = await serverToken(app, doomed);
    expect((await introspect(token)).body).to.include({ active: true });
    const del = await rest(app.baseUrl).call(
      "DELETE",
      `/v2/session/apps/${owner.appId}/oauth/clients/${doomed.clientId}`,
      {
        bearer: owner.key,
      },
    );
    expect(del.status).to.equal(204);
    await expectInactive(token);
  });

  it("answers a live session token of the app as active, with the user and session, and inactive after logout", async () => {
    const s = await sessionToken(app, owner.appId);
    const r = await introspect(s.token);
    const claims = decodeJwt(s.token);
    expect(r.body).to.deep.equal({
      active: true,
      scope: "",
      sub: s.userId,
      exp: claims.exp,
      iat: claims.iat,
      iss: app.config.ISSUER_URL,
      aud: owner.appId,
      jti: claims.jti,
      token_type: "Bearer",
      app_id: owner.appId,
      session_id: s.sessionId,
      acr: "1",
      auth_time: claims.auth_time,
    });
    const out = await rest(app.baseUrl).call("POST", "/v1/session/logout", { body: {}, bearer: s.token });
    expect(out.status).to.equal(204);
    await expectInactive(s.token);
  });

  it("drops a consumed single-use scope from a session token's scope as soon as a password change uses it", async () => {
    const s = await sessionToken(app, owner.appId, {
      scope: PWD,
      untilMs: Date.now() + 300_000,
      mode: "single-use",
    });
    const claims = decodeJwt(s.token);
    expect((await introspect(s.token)).body).to.include({ active: true, scope: PWD });
    const reset = await rest(app.baseUrl).call("POST", "/v1/session/me/password/reset", {
      body: { password: "fresh-passw0rd" },
      bearer: s.token,
    });
    expect(reset.status, reset.text).to.equal(204);
    // The token still says it carries the scope; the session no longer holds it.
    expect(claims.scope).to.equal(PWD);
    const r = await introspect(s.token);
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.deep.equal({
      active: true,
      scope: "",
      sub: s.userId,
      exp: claims.exp,
      iat: claims.iat,
      iss: app.config.ISSUER_URL,
      aud: owner.appId,
      jti: claims.jti,
      token_type: "Bearer",
      app_id: owner.appId,
      session_id: s.sessionId,
      acr: "1",
      auth_time: claims.auth_time,
    });
  });

  it("reports the scopes the session holds for a token now: one granted later, a single-use one only for its token", async () => {
    const s = await sessionToken(app, owner.appId, {
      scope: PWD,
      untilMs: Date.now() + 300_000,
      mode: "single-use",
    });
    // A second access token of the same session, as a refresh gives: the single-use scope stays
    // attached to the first.
    const second = await issueSessionToken(app.registry.signingKeys, {
      issuer: app.config.ISSUER_URL,
      userId: s.userId,
      sessionId: s.sessionId,
      appId: owner.appId,
      scopes: [],
      jti: newJti(),
      lifetimeSeconds: app.config.SESSION_TOKEN_TTL_SECONDS,
      login: { amr: ["otp"], acr: "1", authTime: Math.floor(Date.now() / 1000) },
    });
    const grant = (scope: string, untilMs: number) =>
      app.registry.sessions.grant(s.userId, s.sessionId, { scope, untilMs, mode: "session" });
    expect(await grant("svc:billing:write", Date.now() + 300_000)).to.equal(true);
    expect(await grant("svc:expired", Date.now() - 1)).to.equal(true);
    expect((await introspect(s.token)).body).to.include({
      active: true,
      scope: `svc:billing:write ${PWD}`,
    });
    expect((await introspect(second)).body).to.include({ active: true, scope: "svc:billing:write" });
  });

  it("answers a session token of another app as inactive", async () => {
    const elsewhere = await newApp(app, "Other shop");
    const s = await sessionToken(app, elsewhere.appId);
    await expectInactive(s.token);
  });

  it("refuses a missing token, a body that is not a form and a repeated parameter with 400 invalid_request", async () => {
    const cases = [
      { form: {} as Record<string, string>, says: "token" },
      { form: { token: "" }, says: "token" },
    ];
    for (const { form, says } of cases) {
      const r = await tokenCall(app, "introspect", form, c);
      expect(r.status, r.text).to.equal(400);
      expect(r.body.error).to.equal("invalid_request");
      expect(String(r.body.error_description)).to.include(says);
    }
    const json = await rest(app.baseUrl).call("POST", "/v1/session/oauth/introspect", {
      raw: JSON.stringify({ token: "x" }),
      headers: { authorization: `Basic ${Buffer.from(`${c.clientId}:${c.secret}`).toString("base64")}` },
    });
    expect([json.status, json.body.error]).to.deep.equal([400, "invalid_request"]);
    expect(String(json.body.error_description)).to.include("Content-Type");
    const twice = await rest(app.baseUrl).call("POST", "/v1/session/oauth/introspect", {
      raw: "token=a&token=b",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${c.clientId}:${c.secret}`).toString("base64")}`,
      },
    });
    expect([twice.status, twice.body.error]).to.deep.equal([400, "invalid_request"]);
    expect(String(twice.body.error_description)).to.include("token");
  });

  it("answers 401 invalid_client, as the token endpoint does, to a wrong or missing client", async () => {
    const token = await serverToken(app, c);
    const wrong = await introspect(token, { ...c, secret: "rfs_wrong" });
    expect(wrong.status).to.equal(401);
    expect(wrong.body.error).to.equal("invalid_client");
    expect(wrong.headers.get("www-authenticate")).to.match(/^Basic/);
    expect(wrong.headers.get("cache-control")).to.equal("no-store");
    const none = await introspect(token, null);
    expect([none.status, none.body.error]).to.deep.equal([401, "invalid_client"]);
  });

  it("introspects and revokes over gRPC with the form as http_body and Basic in metadata", async () => {
    const client = new OAuthServiceClient(app.grpcAddress, insecure);
    try {
      const token = await serverToken(app, c);
      const form = { contentType: "application/x-www-form-urlencoded", extensions: [] };
      const httpBody = { ...form, data: Buffer.from(new URLSearchParams({ token }).toString()) };
      const md = () => metadata(basicAuth(c.clientId, c.secret));
      const on = await unary(client.introspectToken.bind(client), { httpBody }, md());
      expect(on.err).to.equal(null);
      expect(on.res).to.include({ active: true, clientId: c.clientId, tokenType: "Bearer" });
      expect(on.headers?.get("cache-control")).to.deep.equal(["no-store"]);
      const revoked = await unary(client.revokeToken.bind(client), { httpBody }, md());
      expect(revoked.err).to.equal(null);
      expect(revoked.res?.data.length).to.equal(0);
      const off = await unary(client.introspectToken.bind(client), { httpBody }, md());
      expect(off.res).to.deep.include({ active: false, clientId: undefined });
      const bad = await unary(
        client.introspectToken.bind(client),
        { httpBody },
        metadata(basicAuth(c.clientId, "rfs_wrong")),
      );
      expect(bad.err?.code).to.equal(status.UNAUTHENTICATED);
      expect(JSON.parse(String(bad.err?.metadata.get("x-http-body")[0]))).to.include({
        error: "invalid_client",
      });
    } finally {
      client.close();
    }
  });

  it("reads a server token's client and revocation in one round trip", async () => {
    // Redis answers nothing while the relay holds: both reads must be sent before either answer.
    const relay = await startRedisRelay(testRedisUrl());
    const redis = new Redis(relay.url);
    try {
      const keys = new Keys(`intro${randomUUID().slice(0, 8)}:`);
      const store = new ClientStore(redis, keys, app.registry.secrets);
      const clientId = "rfc_AAAAAAAAAAAAAAAAAAAAAA";
      const jti = randomUUID();
      await redis.ping();
      relay.hold();
      const standing = store.tokenStanding(clientId, jti);
      await relay.heldSeen(keys.key("client", clientId));
      await relay.heldSeen(store.revokedKey(clientId, jti));
      relay.release();
      expect(await standing).to.deep.equal({ clientExists: false, revoked: false });
    } finally {
      redis.disconnect();
      await relay.close();
    }
  });
});
