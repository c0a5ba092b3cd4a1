import { discover as discoverIssuer } from "../support/oauth-clients.js";
import { expect } from "chai";
import * as oauth from "oauth4webapi";
import {
  calculateJwkThumbprint,
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
import { basicAuth, rest, type RestAnswer } from "../support/rest.js";

type Alg = "ES256" | "RS256" | "PS256";

interface ProofKey {
  alg: Alg;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
}

async function proofKey(alg: Alg): Promise<ProofKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { alg, privateKey, publicKey, jwk: await exportJWK(publicKey) };
}

describe("DPoP at the token endpoint (RFC 9449)", () => {
  let app: TestApp;
  let client: { clientId: string; secret: string };

  before(async function () {
    this.timeout(30_000);
    app = await startTestApp();
    const made = await app.registry.apps.create("Backend");
    const r = await rest(app.baseUrl).call("POST", `/v2/session/apps/${made.app.appId}/oauth/clients`, {
      body: {
        client_name: "Bound",
        provider_url: "https://bound.example.com",
        scopes: ["billing:read"],
        grant_types: ["client_credentials"],
      },
      bearer: made.managementApiKey,
    });
    expect(r.status).to.equal(201);
    client = { clientId: String(r.body.client_id), secret: String(r.body.client_secret) };
  });
  after(async () => {
    await app.stop();
  });

  const issuer = () => app.config.ISSUER_URL;
  const tokenEndpoint = () => `${issuer()}/v1/session/oauth/token`;

  const discover = () => discoverIssuer(app);

  function proof(
    key: ProofKey,
    claims: JWTPayload = {},
    header: { typ?: string; jwk?: JWK; signWith?: CryptoKey } = {},
  ): Promise<string> {
    return new SignJWT({
      htm: "POST",
      htu: tokenEndpoint(),
      jti: crypto.randomUUID(),
      iat: Math.floor(Date.now() / 1000),
      ...claims,
    })
      .setProtectedHeader({ alg: key.alg, typ: header.typ ?? "dpop+jwt", jwk: header.jwk ?? key.jwk })
      .sign(header.signWith ?? key.privateKey);
  }

  const token = (dpop: string | undefined): Promise<RestAnswer> =>
    rest(app.baseUrl).call("POST", "/v1/session/oauth/token", {
      form: { grant_type: "client_credentials" },
      headers: { ...basicAuth(client.clientId, client.secret), ...(dpop === undefined ? {} : { dpop }) },
    });

  function expectInvalidProof(r: RestAnswer) {
    expect(r.status, JSON.stringify(r.body)).to.equal(400);
    expect(Object.keys(r.body).sort()).to.deep.equal(["error", "error_description"]);
    expect(r.body.error).to.equal("invalid_dpop_proof");
    expect(r.headers.get("cache-control")).to.equal("no-store");
  }

  it("publishes dpop_signing_alg_values_supported", async () => {
    expect((await discover()).dpop_signing_alg_values_supported).to.deep.equal(["ES256", "RS256", "PS256"]);
  });

  for (const alg of ["ES256", "RS256", "PS256"] as const) {
    it(`binds the token to a ${alg} key with oauth4webapi's DPoP handle: token_type DPoP and cnf.jkt its thumbprint`, async () => {
      const as = await discover();
      const c: oauth.Client = { client_id: client.clientId };
      const keyPair = await generateKeyPair(alg, { extractable: true });
      const dpop = oauth.DPoP(c, keyPair);
      const res = await oauth.clientCredentialsGrantRequest(
        as,
        c,
        oauth.ClientSecretBasic(client.secret),
        new URLSearchParams({ scope: "billing:read" }),
        { DPoP: dpop, [oauth.allowInsecureRequests]: true },
      );
      const result = await oauth.processClientCredentialsResponse(as, c, res);
      expect(result.token_type).to.equal("dpop");
      const { payload } = await jwtVerify(
        result.access_token,
        createRemoteJWKSet(new URL(`${issuer()}/.well-known/jwks.json`)),
        { issuer: issuer(), typ: "at+jwt" },
      );
      const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey), "sha256");
      expect(payload.cnf).to.deep.equal({ jkt });
    });
  }

  it("answers token_type DPoP in the raw answer, and Bearer with no cnf without a proof", async () => {
    const key = await proofKey("ES256");
    const bound = await token(await proof(key));
    expect(bound.status, JSON.stringify(bound.body)).to.equal(200);
    expect(bound.body.token_type).to.equal("DPoP");
    const plain = await token(undefined);
    expect(plain.body.token_type).to.equal("Bearer");
    const { payload } = await jwtVerify(
      String(plain.body.access_token),
      createRemoteJWKSet(new URL(`${issuer()}/.well-known/jwks.json`)),
    );
    expect(payload).not.to.have.property("cnf");
  });

  it("takes an htu with a query or fragment, compared without them", async () => {
    const key = await proofKey("ES256");
    expect((await token(await proof(key, { htu: `${tokenEndpoint()}?x=1#f` }))).status).to.equal(200);
  });

  describe("refuses with 400 invalid_dpop_proof", () => {
    let key: ProofKey;
    before(async () => {
      key = await proofKey("ES256");
    });

    it("a proof for another URL (htu)", async () => {
      expectInvalidProof(await token(await proof(key, { htu: `${issuer()}/v1/session/oauth/introspect` })));
      expectInvalidProof(
        await token(await proof(key, { htu: "https://elsewhere.example.com/v1/session/oauth/token" })),
      );
    });

    it("a proof for another method (htm)", async () => {
      expectInvalidProof(await token(await proof(key, { htm: "GET" })));
    });

    it("a proof whose iat is out of DPOP_PROOF_MAX_AGE_SECONDS, either way, counted as its refusal", async () => {
      const now = Math.floor(Date.now() / 1000);
      const before = await refusals();
      expectInvalidProof(await token(await proof(key, { iat: now - 120 })));
      expectInvalidProof(await token(await proof(key, { iat: now + 120 })));
      expect((await token(await proof(key, { iat: now - 30 }))).status).to.equal(200);
      expect(await refusals()).to.equal(before + 2);
    });

    it("a replayed proof (its jti seen already)", async () => {
      const once = await proof(key);
      expect((await token(once)).status).to.equal(200);
      expectInvalidProof(await token(once));
    });

    it("a proof whose signature is not by the key in its header", async () => {
      const other = await proofKey("ES256");
      expectInvalidProof(await token(await proof(key, {}, { signWith: other.privateKey })));
    });

    it("a proof of another typ, with a private key in its header, a symmetric alg, or not a JWS at all", async () => {
      expectInvalidProof(await token(await proof(key, {}, { typ: "JWT" })));
      expectInvalidProof(await token(await proof(key, {}, { jwk: await exportJWK(key.privateKey) })));
      const hs = await new SignJWT({
        htm: "POST",
        htu: tokenEndpoint(),
        jti: "x",
        iat: Math.floor(Date.now() / 1000),
      })
        .setProtectedHeader({ alg: "HS256", typ: "dpop+jwt", jwk: key.jwk })
        .sign(new Uint8Array(32));
      expectInvalidProof(await token(hs));
      expectInvalidProof(await token("not-a-proof"));
    });

    it("before the client is authenticated, and spends a proof only for an authenticated client", async () => {
      const wrongSecret = (dpop: string) =>
        rest(app.baseUrl).call("POST", "/v1/session/oauth/token", {
          form: { grant_type: "client_credentials" },
          headers: { ...basicAuth(client.clientId, "rfs_wrong"), dpop },
        });
      expectInvalidProof(await wrongSecret(await proof(key, { htm: "PUT" })));
      const good = await proof(key);
      expect((await wrongSecret(good)).status).to.equal(401);
      // Its jti was not used up by the refused request.
      expect((await token(good)).status).to.equal(200);
    });
  });

  async function refusals(): Promise<number> {
    const { body } = await app.registry.metrics.exposition();
    const m = /ringfence_abuse_refusals_total\{rule="DPOP_PROOF_MAX_AGE_SECONDS"\} (\d+)/.exec(body);
    return Number(m?.[1] ?? "0");
  }
});
