import { expect } from "chai";
import * as oauth from "oauth4webapi";
import { startTestApp, type TestApp } from "../support/app.js";
import { basicAuth, rest, type RestAnswer } from "../support/rest.js";
import { discover, newApp, type AppCreds, type ClientCreds } from "../support/oauth-clients.js";

type SecretMethod = "client_secret_basic" | "client_secret_post";

/**
 * A client authenticates with its secret by the method it named at registration, and by either
 * secret method when it named none, at the token, introspection and revocation endpoints alike.
 */
describe("client authentication by the registered method", () => {
  let app: TestApp;
  let owner: AppCreds;

  before(async function () {
    this.timeout(30_000);
    app = await startTestApp();
    owner = await newApp(app);
  });
  after(async () => {
    await app.stop();
  });

  const ENDPOINTS = ["token", "introspect", "revoke"] as const;
  const opts = { [oauth.allowInsecureRequests]: true } as const;

  /** Registers a client of the app, naming `method` only when one is given. */
  async function register(method?: SecretMethod): Promise<ClientCreds & { answered: unknown }> {
    const r = await rest(app.baseUrl).call("POST", `/v2/session/apps/${owner.appId}/oauth/clients`, {
      body: {
        client_name: "Backend",
        provider_url: "https://backend.example.com",
        scopes: ["billing:read"],
        grant_types: ["client_credentials"],
        ...(method === undefined ? {} : { token_endpoint_auth_method: method }),
      },
      bearer: owner.key,
    });
    expect(r.status, r.text).to.equal(201);
    return {
      clientId: String(r.body.client_id),
      secret: String(r.body.client_secret),
      answered: r.body.token_endpoint_auth_method,
    };
  }

  /** One call to `endpoint` with the client's secret sent by `method`. */
  function send(
    endpoint: (typeof ENDPOINTS)[number],
    c: ClientCreds,
    method: SecretMethod,
  ): Promise<RestAnswer> {
    const form: Record<string, string> =
      endpoint === "token" ? { grant_type: "client_credentials" } : { token: "not a token" };
    return method === "client_secret_basic"
      ? rest(app.baseUrl).call("POST", `/v1/session/oauth/${endpoint}`, {
          form,
          headers: basicAuth(c.clientId, c.secret),
        })
      : rest(app.baseUrl).call("POST", `/v1/session/oauth/${endpoint}`, {
          form: { ...form, client_id: c.clientId, client_secret: c.secret },
        });
  }

  function expectInvalidClient(r: RestAnswer, what: string) {
    expect(r.status, `${what}: ${r.text}`).to.equal(401);
    expect(r.body.error, what).to.equal("invalid_client");
  }

  for (const method of ["client_secret_basic", "client_secret_post"] as const) {
    it(`serves a client registered without a method that sends its secret by ${method} (oauth4webapi), at all three endpoints`, async () => {
      const c = await register();
      expect(c.answered).to.equal("client_secret_basic");
      const as = await discover(app);
      const client: oauth.Client = { client_id: c.clientId };
      const auth =
        method === "client_secret_basic"
          ? oauth.ClientSecretBasic(c.secret)
          : oauth.ClientSecretPost(c.secret);
      const granted = await oauth.processClientCredentialsResponse(
        as,
        client,
        await oauth.clientCredentialsGrantRequest(
          as,
          client,
          auth,
          new URLSearchParams({ scope: "billing:read" }),
          opts,
        ),
      );
      const introspect = async () =>
        oauth.processIntrospectionResponse(
          as,
          client,
          await oauth.introspectionRequest(as, client, auth, granted.access_token, opts),
        );
      expect(await introspect()).to.include({ active: true, client_id: c.clientId, scope: "billing:read" });
      await oauth.processRevocationResponse(
        await oauth.revocationRequest(as, client, auth, granted.access_token, opts),
      );
      expect(await introspect()).to.deep.equal({ active: false });
    });
  }

  it("holds a client that named client_secret_basic to HTTP Basic, and one that named client_secret_post to the form, at all three endpoints", async () => {
    const basic = await register("client_secret_basic");
    const post = await register("client_secret_post");
    expect([basic.answered, post.answered]).to.deep.equal(["client_secret_basic", "client_secret_post"]);
    for (const endpoint of ENDPOINTS) {
      expectInvalidClient(
        await send(endpoint, basic, "client_secret_post"),
        `${endpoint}, basic client in the form`,
      );
      const wrongWay = await send(endpoint, post, "client_secret_basic");
      expectInvalidClient(wrongWay, `${endpoint}, post client in Basic`);
      expect(wrongWay.headers.get("www-authenticate")).to.match(/^Basic/);
      expect((await send(endpoint, basic, "client_secret_basic")).status, endpoint).to.equal(200);
      expect((await send(endpoint, post, "client_secret_post")).status, endpoint).to.equal(200);
    }
  });

  it("takes either secret method from a client stored as client_secret_basic without the mark of a named method, as a registration without one was stored", async () => {
    const c = await register();
    const key = app.registry.keys.key("client", c.clientId);
    await app.registry.redis.hset(key, "token_endpoint_auth_method", "client_secret_basic");
    for (const endpoint of ENDPOINTS) {
      for (const method of ["client_secret_basic", "client_secret_post"] as const) {
        const r = await send(endpoint, c, method);
        expect(r.status, `${endpoint} by ${method}: ${r.text}`).to.equal(200);
      }
    }
  });
});
