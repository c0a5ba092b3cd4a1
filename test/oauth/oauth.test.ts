import { discover as discoverIssuer } from "../support/oauth-clients.js";
import { expect } from "chai";
import { status } from "@grpc/grpc-js";
import * as oauth from "oauth4webapi";
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from "jose";
import { OAuthServiceClient } from "../../src/gen/ringfence/oauth/v1/oauth_service.js";
import { cliEnv, insecure, metadata, runCli, startTestApp, unary, type TestApp } from "../support/app.js";
import { basicAuth, rest, type Json } from "../support/rest.js";
import { keysAddedSince, keysUnder } from "../support/redis.js";

interface AppCreds {
  appId: string;
  key: string;
}

interface ClientCreds {
  clientId: string;
  secret: string;
}

describe("server tokens (OAuth client credentials)", () => {
  let app: TestApp;
  let owner: AppCreds;

  before(async function () {
    this.timeout(30_000);
    app = await startTestApp();
    const created = await runCli(["apps", "create", "--name", "Backend"], cliEnv(app.config));
    const made = JSON.parse(created.stdout) as { app_id: string; management_api_key: string };
    owner = { appId: made.app_id, key: made.management_api_key };
  });
  after(async () => {
    await app.stop();
  });

  const manage = (method: string, path: string, body?: unknown, who: AppCreds | null = owner) =>
    rest(app.baseUrl).call(method, path, { body, bearer: who?.key });

  async function newClient(
    scopes: string[] = ["billing:read", "billing:write"],
    who = owner,
    method?: "client_secret_basic" | "client_secret_post",
  ): Promise<ClientCreds> {
    const r = await manage(
      "POST",
      `/v2/session/apps/${who.appId}/oauth/clients`,
      {
        client_name: "Billing backend",
        provider_url: "https://billing.example.com",
        redirect_uris: [],
        scopes,
        grant_types: ["client_credentials"],
        ...(method === undefined ? {} : { token_endpoint_auth_method: method }),
      },
      who,
    );
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return { clientId: String(r.body.client_id), secret: String(r.body.client_secret) };
  }

  function token(
    form: Record<string, string>,
    opts: { basic?: ClientCreds; contentType?: string; raw?: string } = {},
  ) {
    return rest(app.baseUrl).call("POST", "/v1/session/oauth/token", {
      raw: opts.raw ?? new URLSearchParams(form).toString(),
      headers: {
        "content-type": opts.contentType ?? "application/x-www-form-urlencoded",
        ...(opts.basic === undefined ? {} : basicAuth(opts.basic.clientId, opts.basic.secret)),
      },
    });
  }

  function expectOAuthError(
    r: { status: number; headers: Headers; body: Json },
    httpStatus: number,
    error: string,
  ) {
    expect(r.status, JSON.stringify(r.body)).to.equal(httpStatus);
    expect(Object.keys(r.body).sort()).to.deep.equal(["error", "error_description"]);
    expect(r.body.error).to.equal(error);
    expect(r.headers.get("cache-control")).to.equal("no-store");
  }

  const issuer = () => app.config.ISSUER_URL;
  const jwks = () => createRemoteJWKSet(new URL(`${issuer()}/.well-known/jwks.json`));

  const discover = () => discoverIssuer(app);

  describe("with a real OAuth client library", () => {
    for (const method of ["client_secret_basic", "client_secret_post"] as const) {
      it(`gets a token with ${method} that a JWKS verifier accepts, with every claim of the specification plus client_id`, async () => {
        const c = await newClient(undefined, owner, method);
        const as = await discover();
        const auth =
          method === "client_secret_basic"
            ? oauth.ClientSecretBasic(c.secret)
            : oauth.ClientSecretPost(c.secret);
        const response = await oauth.clientCredentialsGrantRequest(
          as,
          { client_id: c.clientId },
          auth,
          new URLSearchParams({ scope: "billing:read" }),
          { [oauth.allowInsecureRequests]: true },
        );
        expect(response.headers.get("cache-control")).to.equal("no-store");
        const result = await oauth.processClientCredentialsResponse(as, { client_id: c.clientId }, response);
        expect(result).to.include({ token_type: "bearer", expires_in: 3600, scope: "billing:read" });
        expect(result).not.to.have.property("refresh_token");

        const { payload, protectedHeader } = await jwtVerify(result.access_token, jwks(), {
          issuer: issuer(),
          audience: owner.appId,
          typ: "at+jwt",
        });
        expect(protectedHeader.alg).to.equal("ES256");
        expect(protectedHeader.kid).to.be.a("string").and.not.empty;
        expect(Object.keys(payload).sort()).to.deep.equal([
          "app_id",
          "aud",
          "client_id",
          "exp",
          "iat",
          "iss",
          "jti",
          "scope",
          "sub",
        ]);
        expect(payload).to.include({
          sub: c.clientId,
          // RFC 9068 section 2.2: what tells a server token from a user's session token.
          client_id: c.clientId,
          scope: "billing:read",
          app_id: owner.appId,
          aud: owner.appId,
          iss: issuer(),
        });
        expect((payload.exp ?? 0) - (payload.iat ?? 0)).to.equal(3600);
        expect(payload.jti).to.be.a("string").and.not.empty;
        expect(payload).not.to.have.property("session_id");
      });
    }

    it("publishes RFC 8414 metadata that points at the token endpoint and the key set", async () => {
      const as = await discover();
      expect(as).to.include({
        issuer: issuer(),
        token_endpoint: `${issuer()}/v1/session/oauth/token`,
        jwks_uri: `${issuer()}/.well-known/jwks.json`,
      });
      expect(as.grant_types_supported).to.deep.equal(["client_credentials"]);
      expect(as.token_endpoint_auth_methods_supported).to.deep.equal([
        "client_secret_basic",
        "client_secret_post",
        "private_key_jwt",
      ]);
    });
  });

  describe("the token endpoint", () => {
    let c: ClientCreds;
    before(async () => {
      c = await newClient();
    });

    it("answers curl -u id:secret -d grant_type=client_credentials -d scope=… with the token response", async () => {
      const r = await token(
        { grant_type: "client_credentials", scope: "billing:read billing:write" },
        { basic: c },
      );
      expect(r.status).to.equal(200);
      expect(Object.keys(r.body).sort()).to.deep.equal(["access_token", "expires_in", "scope", "token_type"]);
      expect(r.body).to.include({
        token_type: "Bearer",
        expires_in: 3600,
        scope: "billing:read billing:write",
      });
      expect(r.headers.get("cache-control")).to.equal("no-store");
      expect(r.headers.get("pragma")).to.equal("no-cache");
      expect(decodeProtectedHeader(String(r.body.access_token)).typ).to.equal("at+jwt");
    });

    it("grants no scope when scope is omitted", async () => {
      const r = await token({ grant_type: "client_credentials" }, { basic: c });
      expect(r.body.scope).to.equal("");
      const { payload } = await jwtVerify(String(r.body.access_token), jwks(), { issuer: issuer() });
      expect(payload.scope).to.equal("");
    });

    it("refuses a scope the client did not register with 400 invalid_scope naming it", async () => {
      const r = await token({ grant_type: "client_credentials", scope: "billing:read admin" }, { basic: c });
      expectOAuthError(r, 400, "invalid_scope");
      expect(String(r.body.error_description)).to.include("admin");
      expectOAuthError(
        await token({ grant_type: "client_credentials", scope: "a  b" }, { basic: c }),
        400,
        "invalid_scope",
      );
    });

    it("refuses a missing or unsupported grant_type", async () => {
      expectOAuthError(await token({}, { basic: c }), 400, "invalid_request");
      expectOAuthError(await token({ grant_type: "password" }, { basic: c }), 400, "unsupported_grant_type");
    });

    it("refuses a body that is not form-urlencoded, and a repeated parameter, with invalid_request", async () => {
      expectOAuthError(
        await token(
          {},
          { basic: c, contentType: "application/json", raw: '{"grant_type":"client_credentials"}' },
        ),
        400,
        "invalid_request",
      );
      expectOAuthError(
        await token({}, { basic: c, raw: "grant_type=client_credentials&scope=a&scope=b" }),
        400,
        "invalid_request",
      );
    });

    it("refuses credentials given both in HTTP Basic and in the body", async () => {
      const r = await token(
        { grant_type: "client_credentials", client_id: c.clientId, client_secret: c.secret },
        { basic: c },
      );
      expectOAuthError(r, 400, "invalid_request");
    });

    it("answers 401 invalid_client with WWW-Authenticate when HTTP Basic fails", async () => {
      const r = await token({ grant_type: "client_credentials" }, { basic: { ...c, secret: "rfs_wrong" } });
      expectOAuthError(r, 401, "invalid_client");
      expect(r.headers.get("www-authenticate")).to.equal('Basic realm="ringfence"');
      const garbage = await rest(app.baseUrl).call("POST", "/v1/session/oauth/token", {
        form: { grant_type: "client_credentials" },
        headers: { authorization: "Basic !!!" },
      });
      expect(garbage.status).to.equal(401);
      expect(garbage.headers.get("www-authenticate")).to.equal('Basic realm="ringfence"');
    });

    it("answers 401 invalid_client without a challenge when body credentials fail or are missing", async () => {
      const forms: Record<string, string>[] = [
        { grant_type: "client_credentials", client_id: c.clientId, client_secret: "nope" },
        { grant_type: "client_credentials", client_id: "rfc_unknownunknownunknow", client_secret: c.secret },
        { grant_type: "client_credentials" },
      ];
      for (const form of forms) {
        const r = await token(form);
        expectOAuthError(r, 401, "invalid_client");
        expect(r.headers.get("www-authenticate")).to.equal(null);
      }
    });

    it("refuses the secret of a deleted client at once, and a race never yields a token after the delete returned", async () => {
      const victim = await newClient();
      const form = { grant_type: "client_credentials" };
      expect((await token(form, { basic: victim })).status).to.equal(200);
      let deletedAt = 0;
      const issuedAfter: number[] = [];
      const requests = Array.from({ length: 60 }, (_, i) =>
        new Promise((r) => setTimeout(r, i)).then(async () => {
          const r = await token(form, { basic: victim });
          if (r.status === 200 && deletedAt > 0) issuedAfter.push(Date.now());
          return r.status;
        }),
      );
      await new Promise((r) => setTimeout(r, 20));
      const deleted = await manage(
        "DELETE",
        `/v2/session/apps/${owner.appId}/oauth/clients/${victim.clientId}`,
      );
      deletedAt = Date.now();
      expect(deleted.status).to.equal(204);
      const statuses = await Promise.all(requests);
      expect(statuses.every((s) => s === 200 || s === 401)).to.equal(true);
      expect(issuedAfter, "tokens answered after the delete returned").to.deep.equal([]);
      expectOAuthError(await token(form, { basic: victim }), 401, "invalid_client");
    });
  });

  describe("signing keys", () => {
    it("keeps tokens of the old key valid after `ringfence keys rotate`, and signs new ones with the new key", async () => {
      const c = await newClient();
      const before = await token({ grant_type: "client_credentials" }, { basic: c });
      const oldKid = decodeProtectedHeader(String(before.body.access_token)).kid;
      const rotated = await runCli(["keys", "rotate"], cliEnv(app.config));
      expect(rotated.code, rotated.stderr).to.equal(0);
      const { kid } = JSON.parse(rotated.stdout) as { kid: string };
      expect(kid).not.to.equal(oldKid);

      const after = await token({ grant_type: "client_credentials" }, { basic: c });
      expect(decodeProtectedHeader(String(after.body.access_token)).kid).to.equal(kid);
      const set = jwks();
      await jwtVerify(String(before.body.access_token), set, { issuer: issuer(), audience: owner.appId });
      await jwtVerify(String(after.body.access_token), set, { issuer: issuer(), audience: owner.appId });
      const published = (await rest(issuer()).get("/.well-known/jwks.json")).body as { keys: Json[] };
      expect(published.keys.map((k) => k.kid)).to.deep.equal([kid, oldKid]);
      for (const k of published.keys) {
        expect(Object.keys(k).sort()).to.deep.equal(["alg", "crv", "kid", "kty", "use", "x", "y"]);
      }
    });
  });

  describe("management calls", () => {
    it("registers a client (201, secret once, stored only hashed) and rotates it as the specification describes", async () => {
      const r = await manage("POST", `/v2/session/apps/${owner.appId}/oauth/clients`, {
        client_name: "Rotating",
        provider_url: "https://r.example.com",
        scopes: ["billing:read"],
        grant_types: ["client_credentials"],
      });
      expect(r.status).to.equal(201);
      expect(r.body).to.include({
        client_name: "Rotating",
        provider_url: "https://r.example.com",
        app_id: owner.appId,
      });
      expect(r.body.client_secret).to.match(/^rfs_[A-Za-z0-9_-]{43}$/);
      expect(r.body.token_endpoint_auth_method).to.equal("client_secret_basic");
      const stored = await app.registry.redis.hgetall(
        app.registry.keys.key("client", String(r.body.client_id)),
      );
      expect(JSON.stringify(stored)).not.to.include(String(r.body.client_secret));

      // Rotation: a new client with the same scopes and grant types, then delete the old one.
      const old = { clientId: String(r.body.client_id), secret: String(r.body.client_secret) };
      const replacement = await newClient(["billing:read"]);
      expect(
        (await token({ grant_type: "client_credentials", scope: "billing:read" }, { basic: replacement }))
          .status,
      ).to.equal(200);
      expect(
        (await manage("DELETE", `/v2/session/apps/${owner.appId}/oauth/clients/${old.clientId}`)).status,
      ).to.equal(204);
      expect((await token({ grant_type: "client_credentials" }, { basic: old })).status).to.equal(401);
      expect((await token({ grant_type: "client_credentials" }, { basic: replacement })).status).to.equal(
        200,
      );
    });

    const appKeys = () => keysUnder(app.registry.redis, app.config.REDIS_KEY_PREFIX);
    const newKeysSince = (before: ReadonlySet<string>) =>
      keysAddedSince(app.registry.redis, app.config.REDIS_KEY_PREFIX, before);

    const bad: [string, Json, string][] = [
      ["a missing client_name", { client_name: "" }, "client_name"],
      ["a provider_url that is not a URL", { provider_url: "billing" }, "provider_url"],
      ["grant_types other than client_credentials", { grant_types: ["authorization_code"] }, "grant_types"],
      ["no grant_types", { grant_types: [] }, "grant_types"],
      ["a malformed scope", { scopes: ["has space"] }, "scopes.0"],
      ["a redirect URI that is not a URL", { redirect_uris: ["not a url"] }, "redirect_uris.0"],
    ];
    for (const [what, change, field] of bad) {
      it(`refuses ${what} with 400 naming ${field}, creating nothing`, async () => {
        const keys = await appKeys();
        const r = await manage("POST", `/v2/session/apps/${owner.appId}/oauth/clients`, {
          client_name: "X",
          provider_url: "https://x.example.com",
          scopes: [],
          grant_types: ["client_credentials"],
          ...change,
        });
        expect(r.status).to.equal(400);
        expect(r.body).to.include({ code: "bad_request", field });
        expect(await newKeysSince(keys)).to.deep.equal([]);
      });
    }

    it("answers 401 for no key, a wrong key, or another app's key, and changes nothing", async () => {
      const other = JSON.parse(
        (await runCli(["apps", "create", "--name", "Other"], cliEnv(app.config))).stdout,
      ) as {
        app_id: string;
        management_api_key: string;
      };
      const body = {
        client_name: "X",
        provider_url: "https://x.example.com",
        grant_types: ["client_credentials"],
      };
      const path = `/v2/session/apps/${owner.appId}/oauth/clients`;
      const keys = await appKeys();
      for (const who of [
        null,
        { ...owner, key: "rfm_wrong" },
        { appId: other.app_id, key: other.management_api_key },
      ]) {
        const r = await manage("POST", path, body, who);
        expect(r.status).to.equal(401);
        expect(r.body).to.include({ code: "unauthorized" });
        expect(r.headers.get("www-authenticate")).to.equal('Bearer realm="ringfence"');
      }
      expect(
        (await manage("POST", `/v2/session/apps/app_nosuchappnosuchapp/config/scopes`, { scope: "x" }))
          .status,
      ).to.equal(401);
      expect(await newKeysSince(keys)).to.deep.equal([]);
    });

    it("answers 404 for deleting a client the app does not have", async () => {
      const theirs = await newClient();
      const other = JSON.parse(
        (await runCli(["apps", "create", "--name", "Other2"], cliEnv(app.config))).stdout,
      ) as {
        app_id: string;
        management_api_key: string;
      };
      const r = await manage(
        "DELETE",
        `/v2/session/apps/${other.app_id}/oauth/clients/${theirs.clientId}`,
        undefined,
        {
          appId: other.app_id,
          key: other.management_api_key,
        },
      );
      expect(r.status).to.equal(404);
      expect((await token({ grant_type: "client_credentials" }, { basic: theirs })).status).to.equal(200);
    });

    it("adds app scopes idempotently and refuses a malformed one", async () => {
      const path = `/v2/session/apps/${owner.appId}/config/scopes`;
      expect((await manage("POST", path, { scope: "svc:pwd:write" })).body).to.deep.equal({
        app_id: owner.appId,
        scopes: ["svc:pwd:write"],
      });
      expect((await manage("POST", path, { scope: "svc:pwd:write" })).body.scopes).to.deep.equal([
        "svc:pwd:write",
      ]);
      expect((await manage("POST", path, { scope: "billing:read" })).body.scopes).to.deep.equal([
        "billing:read",
        "svc:pwd:write",
      ]);
      const bad = await manage("POST", path, { scope: 'quote"d' });
      expect(bad.status).to.equal(400);
      expect(bad.body).to.include({ code: "bad_request", field: "scope" });
    });
  });

  describe("over gRPC", () => {
    it("issues a token from the raw form and HTTP Basic in metadata, and maps errors to the RFC 6749 body", async () => {
      const c = await newClient();
      const client = new OAuthServiceClient(app.grpcAddress, insecure);
      const { authorization: basic } = basicAuth(c.clientId, c.secret);
      const httpBody = (form: string) => ({
        contentType: "application/x-www-form-urlencoded",
        data: Buffer.from(form),
        extensions: [],
      });
      const ok = await unary(
        client.createToken.bind(client),
        { httpBody: httpBody("grant_type=client_credentials&scope=billing:write") },
        metadata({ authorization: basic }),
      );
      expect(ok.err).to.equal(null);
      expect(ok.res).to.include({ tokenType: "Bearer", expiresIn: 3600, scope: "billing:write" });
      expect(ok.headers?.get("cache-control")).to.deep.equal(["no-store"]);
      const { payload } = await jwtVerify(ok.res?.accessToken ?? "", jwks(), { issuer: issuer() });
      expect(payload.sub).to.equal(c.clientId);

      const bad = await unary(
        client.createToken.bind(client),
        { httpBody: httpBody("grant_type=client_credentials") },
        metadata(basicAuth(c.clientId, "wrong")),
      );
      expect(bad.err?.code).to.equal(status.UNAUTHENTICATED);
      expect(bad.err?.metadata.get("x-http-status")).to.deep.equal(["401"]);
      expect(JSON.parse(String(bad.err?.metadata.get("x-http-body")[0]))).to.include({
        error: "invalid_client",
      });
      client.close();
    });
  });
});
