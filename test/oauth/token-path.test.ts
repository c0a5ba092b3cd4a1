import { expect } from "chai";
import { performance } from "node:perf_hooks";
import { cliEnv, runCli, startTestApp, type TestApp } from "../support/app.js";
import { basicAuth, rest } from "../support/rest.js";
import { testRedisUrl } from "../support/hooks.js";
import { commandsDuring, waitFor } from "../support/redis.js";
import { ClientStore, CLIENT_READING_MS, DELETE_SETTLE_MS } from "../../src/oauth/clients.js";
import { TokenFailures } from "../../src/oauth/failures.js";
import { clientCredentialsGrant } from "../../src/oauth/grant.js";
import type { SigningKeys } from "../../src/oauth/keys/signing-keys.js";
import { proofChecks } from "../../src/oauth/module.js";
import { RingfenceError } from "../../src/errors.js";
import { testCall } from "../support/call.js";

interface ClientCreds {
  clientId: string;
  secret: string;
}

/**
 * What a token costs Redis (a read of its client now and then, no write), what a failure costs
 * (its windows, only then), and the guarantee that pays for neither: no token is answered after
 * its client's deletion has answered, on any instance.
 */
describe("the token path", () => {
  let a: TestApp;
  let b: TestApp;
  let owner: { appId: string; key: string };
  const limits = { TOKEN_FAILURES_CLIENT: "10/300", TOKEN_FAILURES_IP: "30/300" };

  before(async function () {
    this.timeout(30_000);
    a = await startTestApp(limits);
    // A second instance on the same data, as another replica or worker would be.
    b = await startTestApp({ ...limits, REDIS_KEY_PREFIX: a.config.REDIS_KEY_PREFIX });
    const made = JSON.parse(
      (await runCli(["apps", "create", "--name", "Tokens"], cliEnv(a.config))).stdout,
    ) as {
      app_id: string;
      management_api_key: string;
    };
    owner = { appId: made.app_id, key: made.management_api_key };
  });
  after(async () => {
    await b.stop();
    await a.stop();
  });

  async function newClient(): Promise<ClientCreds> {
    const r = await rest(a.baseUrl).call("POST", `/v2/session/apps/${owner.appId}/oauth/clients`, {
      body: {
        client_name: "Backend",
        provider_url: "https://backend.example.com",
        scopes: ["billing:read"],
        grant_types: ["client_credentials"],
      },
      bearer: owner.key,
    });
    expect(r.status).to.equal(201);
    return { clientId: String(r.body.client_id), secret: String(r.body.client_secret) };
  }

  const token = (app: TestApp, c: ClientCreds) =>
    rest(app.baseUrl).call("POST", "/v1/session/oauth/token", {
      form: { grant_type: "client_credentials", scope: "billing:read" },
      headers: basicAuth(c.clientId, c.secret),
    });

  /** The commands of the token path: on the client, the failure windows, the signing keys. */
  const tokenCommands = (seen: string[][], c: ClientCreds) =>
    seen.filter((args) =>
      args.some((x) => x.includes(c.clientId) || x.includes("token-failures") || x.includes("signing:")),
    );

  it("issues a token in at most 3 Redis commands, none of them a write, even when its client must be read", async () => {
    const c = await newClient();
    expect((await token(a, c)).status).to.equal(200);
    // Past a reading's life: the next token reads its client again.
    await new Promise((resolve) => setTimeout(resolve, CLIENT_READING_MS + 20));
    const seen = await commandsDuring(testRedisUrl(), async () => {
      expect((await token(a, c)).status).to.equal(200);
    });
    const names = tokenCommands(seen, c).map((args) => (args[0] ?? "").toLowerCase());
    expect(names).to.include("hgetall");
    expect(names.length, names.join(", ")).to.be.at.most(3);
    for (const name of names) expect(["hgetall", "hget"]).to.include(name);

    const many = await commandsDuring(testRedisUrl(), async () => {
      for (let i = 0; i < 10; i++) expect((await token(a, c)).status).to.equal(200);
    });
    const writes = tokenCommands(many, c).filter(
      (args) => !["hgetall", "hget"].includes((args[0] ?? "").toLowerCase()),
    );
    expect(writes).to.deep.equal([]);
    expect(tokenCommands(many, c).length).to.be.at.most(3 * 10);
  });

  it("counts a failed authentication in its two windows, and a success in none", async () => {
    const c = await newClient();
    const failing = await commandsDuring(testRedisUrl(), async () => {
      expect((await token(a, { ...c, secret: "rfs_wrong" })).status).to.equal(401);
    });
    const windows = (seen: string[][]) =>
      seen
        .filter((args) => args.some((x) => x.includes("token-failures")))
        .flatMap((args) => args.filter((x) => x.includes("token-failures")));
    expect(new Set(windows(failing)).size, "the client's window and the address's").to.equal(2);
    const succeeding = await commandsDuring(testRedisUrl(), async () => {
      for (let i = 0; i < 3; i++) expect((await token(a, c)).status).to.equal(200);
    });
    expect(windows(succeeding)).to.deep.equal([]);
  });

  it("answers no token after the client's deletion answered, from either instance, with tokens racing the deletion", async function () {
    this.timeout(30_000);
    const victim = await newClient();
    const answers: { app: string; status: number; sentAt: number; at: number }[] = [];
    let stop = false;
    const loop = async (app: TestApp, name: string) => {
      while (!stop) {
        const sentAt = performance.now();
        const r = await token(app, victim);
        answers.push({ app: name, status: r.status, sentAt, at: performance.now() });
        expect([200, 401]).to.include(r.status);
        if (r.status === 401) return;
      }
    };
    const loops = [a, b, a, b, a, b].map((app, i) => loop(app, i % 2 === 0 ? "a" : "b"));
    try {
      await waitFor(() =>
        Promise.resolve(
          ["a", "b"].every((n) => answers.filter((x) => x.app === n && x.status === 200).length >= 3),
        ),
      );
      const deleteSentAt = performance.now();
      const deleted = await rest(a.baseUrl).call(
        "DELETE",
        `/v2/session/apps/${owner.appId}/oauth/clients/${victim.clientId}`,
        { bearer: owner.key },
      );
      const deletedAt = performance.now();
      expect(deleted.status).to.equal(204);
      expect(deletedAt - deleteSentAt).to.be.at.least(DELETE_SETTLE_MS);
      await Promise.all(loops);
      const late = answers.filter((x) => x.status === 200 && x.at > deletedAt);
      expect(late, "tokens answered after the deletion answered").to.deep.equal([]);
      // The race was run: tokens were asked for, and answered, while the deletion was under way.
      expect(answers.some((x) => x.status === 200 && x.sentAt > deleteSentAt)).to.equal(true);
      for (const app of [a, b]) expect((await token(app, victim)).status).to.equal(401);
    } finally {
      stop = true;
      await Promise.allSettled(loops);
    }
  });

  describe("a token signed for longer than a reading of its client lasts", () => {
    /** The grant of an instance whose signing waits for `gate`, telling `started` when it begins. */
    function slowGrant(c: ClientCreds, gate: Promise<void>, started: () => void) {
      const r = a.registry;
      const keys: SigningKeys = {
        current: async () => {
          started();
          await gate;
          return r.signingKeys.current();
        },
        rotate: () => r.signingKeys.rotate(),
        jwks: () => r.signingKeys.jwks(),
      };
      const ctx = testCall(
        { authorization: basicAuth(c.clientId, c.secret).authorization },
        { requestId: "slow-signer" },
      );
      return clientCredentialsGrant(
        {
          clients: new ClientStore(r.redis, r.keys, r.secrets),
          failures: new TokenFailures(r.redis, r.keys, { perClient: null, perAddress: null }),
          keys,
          issuer: a.config.ISSUER_URL,
          lifetimeSeconds: 60,
          ...proofChecks(r),
        },
        {
          contentType: "application/x-www-form-urlencoded",
          data: Buffer.from("grant_type=client_credentials"),
        },
        ctx,
      );
    }

    /** Runs a slow grant, and `meanwhile` once it signs; resolves its token or its error. */
    async function whileSigning(c: ClientCreds, meanwhile: () => Promise<void>) {
      let open: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => (open = resolve));
      let signing: () => void = () => undefined;
      const started = new Promise<void>((resolve) => (signing = resolve));
      const grant = Promise.resolve(slowGrant(c, gate, signing)).then(
        (answer) => answer,
        (err: unknown) => err,
      );
      await started;
      await meanwhile();
      open();
      return grant;
    }

    it("is answered once its client, read again, is still there", async () => {
      const c = await newClient();
      const answer = await whileSigning(
        c,
        () => new Promise((resolve) => setTimeout(resolve, CLIENT_READING_MS + 20)),
      );
      expect(answer).to.have.property("accessToken").that.is.a("string");
    });

    it("is refused invalid_client when its client was deleted meanwhile by another instance", async () => {
      const c = await newClient();
      const answer = await whileSigning(c, async () => {
        expect(await b.registry.clients.delete(owner.appId, c.clientId)).to.equal(true);
      });
      expect(answer).to.be.instanceOf(RingfenceError);
      expect((answer as RingfenceError).code).to.equal("invalid_client");
    });
  });
});
