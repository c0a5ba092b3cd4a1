import { discover as discoverIssuer } from "../support/oauth-clients.js";
import { expect } from "chai";
import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as oauth from "oauth4webapi";
import {
  createRemoteJWKSet,
  exportJWK,
  generateKeyPair,
  jwtVerify,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from "jose";
import { startTestApp, type TestApp } from "../support/app.js";
import { basicAuth, rest, type Json, type RestAnswer } from "../support/rest.js";
import { keysAddedSince, keysUnder, waitFor } from "../support/redis.js";
import { OutboundGuard } from "../../src/net/outbound.js";
import { ClientAssertions } from "../../src/oauth/client-assertion.js";
import { ClientKeySets } from "../../src/oauth/client-keys.js";

const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

interface ClientKey {
  alg: "ES256" | "RS256";
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

async function clientKey(alg: "ES256" | "RS256", kid: string): Promise<ClientKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { alg, kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" } };
}

/** A local JWKS server (test peers live on loopback, which OUTBOUND_ALLOWED_CIDRS allows in tests). */
async function jwksServer(
  keys: () => JWK[],
): Promise<{ url: string; fetches: () => number; close: () => Promise<void> }> {
  let fetches = 0;
  const server: Server = createServer((_req, res) => {
    fetches += 1;
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ keys: keys() }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/jwks.json`,
    fetches: () => fetches,
    close: () =>
      new Promise((resolve) => {
        server.close(() => {
          resolve();
        });
      }),
  };
}

describe("private_key_jwt client authentication (RFC 7523) and registered auth methods", () => {
  let app: TestApp;
  let appId: string;
  let mgmtKey: string;
  let es: ClientKey;
  let rs: ClientKey;

  before(async function () {
    this.timeout(30_000);
    app = await startTestApp();
    const made = await app.registry.apps.create("Backend");
    appId = made.app.appId;
    mgmtKey = made.managementApiKey;
    es = await clientKey("ES256", "es-1");
    rs = await clientKey("RS256", "rs-1");
  });
  after(async () => {
    await app.stop();
  });

  const issuer = () => app.config.ISSUER_URL;
  const tokenEndpoint = () => `${issuer()}/v1/session/oauth/token`;

  const register = (body: Json) =>
    rest(app.baseUrl).call("POST", `/v2/session/apps/${appId}/oauth/clients`, {
      body: {
        client_name: "Signer",
        provider_url: "https://signer.example.com",
        scopes: ["billing:read"],
        grant_types: ["client_credentials"],
        ...body,
      },
      bearer: mgmtKey,
    });

  async function keyClient(change: Json): Promise<string> {
    const r = await register({ token_endpoint_auth_method: "private_key_jwt", ...change });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return String(r.body.client_id);
  }

  async function secretClient(method?: string): Promise<{ clientId: string; secret: string }> {
    const r = await register(method === undefined ? {} : { token_endpoint_auth_method: method });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return { clientId: String(r.body.client_id), secret: String(r.body.client_secret) };
  }

  function assertion(clientId: string, key: ClientKey, claims: JWTPayload = {}, kid = key.kid) {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ jti: crypto.randomUUID(), ...claims })
      .setProtectedHeader({ alg: key.alg, kid })
      .setIssuer(claims.iss ?? clientId)
      .setSubject(claims.sub ?? clientId)
      .setAudience(claims.aud ?? issuer())
      .setIssuedAt(now)
      .setExpirationTime(typeof claims.exp === "number" ? claims.exp : now + 60)
      .sign(key.privateKey);
  }

  const token = (form: Record<string, string>, headers: Record<string, string> = {}): Promise<RestAnswer> =>
    rest(app.baseUrl).call("POST", "/v1/session/oauth/token", {
      form: { grant_type: "client_credentials", ...form },
      headers,
    });

  const withAssertion = (jwt: string, clientId?: string) =>
    token({
      client_assertion_type: JWT_BEARER,
      client_assertion: jwt,
      ...(clientId === undefined ? {} : { client_id: clientId }),
    });

  function expectInvalidClient(r: RestAnswer) {
    expect(r.status, JSON.stringify(r.body)).to.equal(401);
    expect(r.body.error).to.equal("invalid_client");
    expect(r.headers.get("cache-control")).to.equal("no-store");
  }

  const discover = () => discoverIssuer(app);

  describe("with a real OAuth client library", () => {
    it("discovers private_key_jwt and its signing algorithms in the metadata", async () => {
      const as = await discover();
      expect(as.token_endpoint_auth_methods_supported).to.deep.equal([
        "client_secret_basic",
        "client_secret_post",
        "private_key_jwt",
      ]);
      expect(as.token_endpoint_auth_signing_alg_values_supported).to.include.members(["ES256", "RS256"]);
      expect(as.dpop_signing_alg_values_supported).to.include.members(["ES256", "RS256"]);
    });

    for (const method of ["client_secret_basic", "client_secret_post"] as const) {
      it(`gets a token with ${method} registered`, async () => {
        const c = await secretClient(method);
        const as = await discover();
        const auth =
          method === "client_secret_basic"
            ? oauth.ClientSecretBasic(c.secret)
            : oauth.ClientSecretPost(c.secret);
        const res = await oauth.clientCredentialsGrantRequest(
          as,
          { client_id: c.clientId },
          auth,
          new URLSearchParams(),
          {
            [oauth.allowInsecureRequests]: true,
          },
        );
        const result = await oauth.processClientCredentialsResponse(as, { client_id: c.clientId }, res);
        expect(result.token_type).to.equal("bearer");
      });
    }

    for (const alg of ["ES256", "RS256"] as const) {
      it(`gets a token with private_key_jwt signed ${alg}, a token a JWKS verifier accepts`, async () => {
        const key = alg === "ES256" ? es : rs;
        const clientId = await keyClient({ jwks: { keys: [key.publicJwk] } });
        const as = await discover();
        const client = { client_id: clientId };
        const res = await oauth.clientCredentialsGrantRequest(
          as,
          client,
          oauth.PrivateKeyJwt({ key: key.privateKey, kid: key.kid }),
          new URLSearchParams({ scope: "billing:read" }),
          { [oauth.allowInsecureRequests]: true },
        );
        const result = await oauth.processClientCredentialsResponse(as, client, res);
        expect(result).to.include({ token_type: "bearer", scope: "billing:read" });
        const { payload } = await jwtVerify(
          result.access_token,
          createRemoteJWKSet(new URL(`${issuer()}/.well-known/jwks.json`)),
          { issuer: issuer(), audience: appId, typ: "at+jwt" },
        );
        expect(payload).to.include({ sub: clientId, client_id: clientId });
      });
    }
  });

  describe("registration", () => {
    it("registers a private_key_jwt client with no secret, keeping its public keys only", async () => {
      const keys = await keysUnder(app.registry.redis, app.config.REDIS_KEY_PREFIX);
      const r = await register({
        token_endpoint_auth_method: "private_key_jwt",
        jwks: { keys: [es.publicJwk, rs.publicJwk] },
      });
      expect(r.status, JSON.stringify(r.body)).to.equal(201);
      expect(r.body.client_secret).to.equal("");
      expect(r.body.token_endpoint_auth_method).to.equal("private_key_jwt");
      expect(r.body.jwks).to.deep.equal({ keys: [es.publicJwk, rs.publicJwk] });
      const added = await keysAddedSince(app.registry.redis, app.config.REDIS_KEY_PREFIX, keys);
      expect(added, added.join(" ")).to.have.length(1);
      const stored = await app.registry.redis.hgetall(added[0] ?? "");
      expect(stored).not.to.have.property("secret_hash");
      expect(stored.token_endpoint_auth_method).to.equal("private_key_jwt");
    });

    const privateJwk = async () => ({ ...(await exportJWK(es.privateKey)), kid: "p" });
    const weakRsa = () => {
      // jose will not make one: node:crypto does.
      const { publicKey } = generateKeyPairSync("rsa", { modulusLength: 1024 });
      return { ...publicKey.export({ format: "jwk" }), kid: "weak" };
    };
    const bad: [string, () => Json | Promise<Json>, string][] = [
      ["an unknown method", () => ({ token_endpoint_auth_method: "none" }), "token_endpoint_auth_method"],
      ["a secret client with jwks", () => ({ jwks: { keys: [es.publicJwk] } }), "jwks"],
      [
        "a secret client with a jwks_uri",
        () => ({
          token_endpoint_auth_method: "client_secret_post",
          jwks_uri: "https://keys.example.com/jwks",
        }),
        "jwks_uri",
      ],
      ["private_key_jwt without keys", () => ({ token_endpoint_auth_method: "private_key_jwt" }), "jwks"],
      [
        "a private key in jwks",
        async () => ({ token_endpoint_auth_method: "private_key_jwt", jwks: { keys: [await privateJwk()] } }),
        "jwks.keys.0.d",
      ],
      [
        "a key without kid",
        () => ({
          token_endpoint_auth_method: "private_key_jwt",
          jwks: { keys: [{ ...es.publicJwk, kid: undefined }] },
        }),
        "jwks.keys.0.kid",
      ],
      [
        "an RSA key under 2048 bits",
        () => ({ token_endpoint_auth_method: "private_key_jwt", jwks: { keys: [weakRsa()] } }),
        "jwks.keys.0.n",
      ],
      [
        "a P-384 key",
        () => ({
          token_endpoint_auth_method: "private_key_jwt",
          jwks: { keys: [{ ...es.publicJwk, crv: "P-384" }] },
        }),
        "jwks.keys.0.crv",
      ],
      [
        "more than 5 keys",
        () => ({
          token_endpoint_auth_method: "private_key_jwt",
          jwks: { keys: Array.from({ length: 6 }, (_, i) => ({ ...es.publicJwk, kid: `k${i}` })) },
        }),
        "jwks.keys",
      ],
      [
        "both jwks and jwks_uri",
        () => ({
          token_endpoint_auth_method: "private_key_jwt",
          jwks: { keys: [es.publicJwk] },
          jwks_uri: "https://keys.example.com/jwks",
        }),
        "jwks_uri",
      ],
      [
        "a plain-http jwks_uri to a host OUTBOUND_ALLOWED_CIDRS does not list",
        () => ({
          token_endpoint_auth_method: "private_key_jwt",
          jwks_uri: "http://keys.example.com/jwks",
        }),
        "jwks_uri",
      ],
    ];
    for (const [what, body, field] of bad) {
      it(`refuses ${what} with 400 naming ${field}, creating nothing`, async () => {
        const keys = await keysUnder(app.registry.redis, app.config.REDIS_KEY_PREFIX);
        const r = await register(await body());
        expect(r.status, JSON.stringify(r.body)).to.equal(400);
        expect(r.body).to.include({ code: "bad_request", field });
        expect(await keysAddedSince(app.registry.redis, app.config.REDIS_KEY_PREFIX, keys)).to.deep.equal([]);
      });
    }
  });

  describe("the registered method is the only one allowed", () => {
    it("refuses a client that named client_secret_basic sending its secret in the form, and the other way round", async () => {
      const basic = await secretClient("client_secret_basic");
      const post = await secretClient("client_secret_post");
      expectInvalidClient(await token({ client_id: basic.clientId, client_secret: basic.secret }));
      expect((await token({}, basicAuth(basic.clientId, basic.secret))).status).to.equal(200);
      expectInvalidClient(await token({}, basicAuth(post.clientId, post.secret)));
      expect((await token({ client_id: post.clientId, client_secret: post.secret })).status).to.equal(200);
    });

    it("keeps serving a client registered before clients chose a method, by either secret method", async () => {
      const c = await secretClient();
      await app.registry.redis.hdel(
        app.registry.keys.key("client", c.clientId),
        "token_endpoint_auth_method",
      );
      // Once the reading this process keeps of the client has been renewed.
      await waitFor(
        async () => (await token({ client_id: c.clientId, client_secret: c.secret })).status === 200,
      );
      expect((await token({}, basicAuth(c.clientId, c.secret))).status).to.equal(200);
    });

    it("refuses an assertion from a secret client, and a secret for a private_key_jwt client", async () => {
      const c = await secretClient();
      const other = await clientKey("ES256", "k");
      expectInvalidClient(await withAssertion(await assertion(c.clientId, other)));
      const k = await keyClient({ jwks: { keys: [es.publicJwk] } });
      expectInvalidClient(await token({}, basicAuth(k, "rfs_anything")));
      expectInvalidClient(await token({ client_id: k, client_secret: "rfs_anything" }));
    });

    it("refuses a secret and an assertion together with invalid_request", async () => {
      const k = await keyClient({ jwks: { keys: [es.publicJwk] } });
      const r = await token(
        { client_assertion_type: JWT_BEARER, client_assertion: await assertion(k, es) },
        basicAuth(k, "rfs_x"),
      );
      expect([r.status, r.body.error]).to.deep.equal([400, "invalid_request"]);
    });
  });

  describe("client assertions", () => {
    let clientId: string;
    before(async () => {
      clientId = await keyClient({ jwks: { keys: [es.publicJwk, rs.publicJwk] } });
    });

    it("accepts the token endpoint as aud, and a client_id in the form that matches", async () => {
      const r = await withAssertion(await assertion(clientId, es, { aud: tokenEndpoint() }), clientId);
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(r.body.token_type).to.equal("Bearer");
    });

    it("refuses a replayed assertion with invalid_client, its jti kept under the client's hash tag until exp", async () => {
      const jwt = await assertion(clientId, rs);
      expect((await withAssertion(jwt)).status).to.equal(200);
      expectInvalidClient(await withAssertion(jwt));
      const jtiKeys = await app.registry.redis.keys(`${app.registry.keys.key("client", clientId)}:jti:*`);
      expect(jtiKeys.length).to.be.at.least(1);
      for (const k of jtiKeys) expect(await app.registry.redis.pttl(k)).to.be.within(1, 91_000);
    });

    it("refuses an assertion signed by another key under a registered kid", async () => {
      const impostor = await clientKey("ES256", es.kid);
      expectInvalidClient(await withAssertion(await assertion(clientId, impostor)));
    });

    it("refuses an expired assertion, and one whose exp is more than 5 minutes ahead", async () => {
      const now = Math.floor(Date.now() / 1000);
      expectInvalidClient(await withAssertion(await assertion(clientId, es, { exp: now - 120 })));
      expectInvalidClient(await withAssertion(await assertion(clientId, es, { exp: now + 600 })));
      expect((await withAssertion(await assertion(clientId, es, { exp: now + 280 }))).status).to.equal(200);
    });

    it("refuses a wrong aud, iss other than sub, no jti, and a client_id other than the assertion's", async () => {
      expectInvalidClient(
        await withAssertion(await assertion(clientId, es, { aud: "https://elsewhere.example.com" })),
      );
      expectInvalidClient(
        await withAssertion(await assertion(clientId, es, { iss: "rfc_someoneelse_xxxxxxxxxx" })),
      );
      const noJti = await new SignJWT({})
        .setProtectedHeader({ alg: "ES256", kid: es.kid })
        .setIssuer(clientId)
        .setSubject(clientId)
        .setAudience(issuer())
        .setExpirationTime("1m")
        .sign(es.privateKey);
      expectInvalidClient(await withAssertion(noJti));
      const other = await keyClient({ jwks: { keys: [es.publicJwk] } });
      expectInvalidClient(await withAssertion(await assertion(clientId, es), other));
    });

    it("refuses an unknown client_assertion_type, and an assertion without its type", async () => {
      const jwt = await assertion(clientId, es);
      const r = await token({ client_assertion_type: "urn:example:saml", client_assertion: jwt });
      expectInvalidClient(r);
      const missing = await token({ client_assertion: jwt });
      expect([missing.status, missing.body.error]).to.deep.equal([400, "invalid_request"]);
    });
  });

  describe("failure windows", () => {
    let limited: TestApp;
    after(async () => limited.stop());

    it("counts bad assertions in TOKEN_FAILURES_CLIENT, 429 past it, and still serves a good one", async function () {
      this.timeout(30_000);
      limited = await startTestApp({ TOKEN_FAILURES_CLIENT: "3/300" });
      const made = await limited.registry.apps.create("Limited");
      const r = await rest(limited.baseUrl).call("POST", `/v2/session/apps/${made.app.appId}/oauth/clients`, {
        body: {
          client_name: "Signer",
          provider_url: "https://signer.example.com",
          scopes: [],
          grant_types: ["client_credentials"],
          token_endpoint_auth_method: "private_key_jwt",
          jwks: { keys: [es.publicJwk] },
        },
        bearer: made.managementApiKey,
      });
      const id = String(r.body.client_id);
      const impostor = await clientKey("ES256", es.kid);
      const aud = limited.config.ISSUER_URL;
      const send = async (key: ClientKey) =>
        rest(limited.baseUrl).call("POST", "/v1/session/oauth/token", {
          form: {
            grant_type: "client_credentials",
            client_assertion_type: JWT_BEARER,
            client_assertion: await assertion(id, key, { aud }),
          },
        });
      for (let i = 0; i < 3; i++) expect((await send(impostor)).status).to.equal(401);
      const refused = await send(impostor);
      expect([refused.status, refused.body.error]).to.deep.equal([429, "too_many_attempts"]);
      expect((await send(es)).status).to.equal(200);
      const metrics = await limited.registry.metrics.exposition();
      expect(metrics.body).to.match(/ringfence_abuse_refusals_total\{rule="TOKEN_FAILURES_CLIENT"\} 1/);
    });
  });

  describe("jwks_uri", () => {
    it("fetches the client's key set once, and a flood of unknown kids does not fetch it again each time", async () => {
      const served = await jwksServer(() => [es.publicJwk]);
      try {
        const id = await keyClient({ jwks_uri: served.url });
        expect((await withAssertion(await assertion(id, es))).status).to.equal(200);
        expect((await withAssertion(await assertion(id, es))).status).to.equal(200);
        expect(served.fetches()).to.equal(1);
        const unknown = await clientKey("ES256", "unknown-kid");
        const answers = await Promise.all(
          Array.from({ length: 10 }, async () => withAssertion(await assertion(id, unknown))),
        );
        for (const a of answers) expectInvalidClient(a);
        // One fetch again at most within the cooldown, whatever the number of unknown kids.
        expect(served.fetches()).to.be.at.most(2);
      } finally {
        await served.close();
      }
    });

    it("refuses a jwks_uri on a private address at registration when OUTBOUND_ALLOWED_CIDRS does not allow it", async function () {
      this.timeout(30_000);
      const strict = await startTestApp({ OUTBOUND_ALLOWED_CIDRS: "" });
      try {
        const made = await strict.registry.apps.create("Strict");
        const r = await rest(strict.baseUrl).call(
          "POST",
          `/v2/session/apps/${made.app.appId}/oauth/clients`,
          {
            body: {
              client_name: "Signer",
              provider_url: "https://signer.example.com",
              scopes: [],
              grant_types: ["client_credentials"],
              token_endpoint_auth_method: "private_key_jwt",
              jwks_uri: "https://127.0.0.1:8443/jwks.json",
            },
            bearer: made.managementApiKey,
          },
        );
        expect(r.status).to.equal(400);
        expect(r.body).to.include({ code: "bad_request", field: "jwks_uri" });
        expect(String(r.body.message)).to.match(/private or reserved/);
      } finally {
        await strict.stop();
      }
    });

    it("never connects to a key set whose address the guard refuses when the assertion is checked", async () => {
      const served = await jwksServer(() => [es.publicJwk]);
      try {
        const id = await keyClient({ jwks_uri: served.url });
        const strict = new ClientAssertions({
          redis: app.registry.redis,
          keys: app.registry.keys,
          keySets: new ClientKeySets({ fetch: new OutboundGuard("").fetch }),
          issuer: issuer(),
          tokenEndpoint: tokenEndpoint(),
        });
        expect(await strict.verify(app.registry.clients, id, await assertion(id, es))).to.equal(undefined);
        expect(served.fetches()).to.equal(0);
      } finally {
        await served.close();
      }
    });
  });
});
