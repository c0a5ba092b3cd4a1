import { expect } from "chai";
import { statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { RelyingParties } from "../../src/passkeys/relying-party.js";
import { cliEnv, runCli, type CliResult } from "../support/app.js";
import { PasskeyRig, type PasskeyUser } from "../support/passkeys.js";
import { keysUnder } from "../support/redis.js";
import type { Json } from "../support/rest.js";

/**
 * `ringfence apps passkeys APP_ID --rp-id D --origins O[,…]` as operators run it (the built CLI,
 * dist/cli.js: `npm run build` first), against the data of a running service
 * (docs/session-api.md#passkeys, docs/cli.md).
 */
describe("ringfence apps passkeys (CLI)", function () {
  this.timeout(60_000);
  let rig: PasskeyRig;
  let env: Record<string, string>;

  before(async () => {
    for (const file of ["commands", "relying-party"]) {
      const built = fileURLToPath(new URL(`../../dist/passkeys/${file}.js`, import.meta.url));
      const source = fileURLToPath(new URL(`../../src/passkeys/${file}.ts`, import.meta.url));
      if ((statSync(built, { throwIfNoEntry: false })?.mtimeMs ?? 0) < statSync(source).mtimeMs) {
        throw new Error(`dist/ is older than src/passkeys/${file}.ts: run \`npm run build\` first`);
      }
    }
    rig = await PasskeyRig.start();
    env = cliEnv(rig.app.config);
  });
  after(async () => {
    await rig.stop();
  });

  const run = (args: string[]): Promise<CliResult> => runCli(["apps", ...args], env, true);

  async function ok(args: string[]): Promise<Json> {
    const r = await run(args);
    expect(r.stderr).to.equal("");
    expect(r.code).to.equal(0);
    expect(r.stdout.trim().split("\n")).to.have.length(1);
    return JSON.parse(r.stdout) as Json;
  }

  async function newApp(): Promise<string> {
    return String((await ok(["create", "--name", "Passkey CLI"])).app_id);
  }

  const relyingParty = (appId: string) =>
    new RelyingParties(rig.app.registry.redis, rig.app.registry.keys).get(appId);

  /** A user of the app, logged in by password, holding a passkey made on `origin`. */
  async function userWithPasskey(appId: string, origin: string): Promise<PasskeyUser> {
    const u = await rig.user(appId);
    const credential = u.auth.create(await rig.creationOptions(u), { origin });
    expect((await rig.registerAnswer(u, credential)).status).to.equal(201);
    return u;
  }

  it("sets an app's relying party, prints {app_id, rp_id, origins} on one line (origins as browsers write them, once each), and the app's passkeys follow it", async () => {
    const appId = await newApp();
    const printed = await ok([
      "passkeys",
      appId,
      "--rp-id",
      "example.com",
      "--origins",
      "https://example.com/, https://login.example.com:8443,https://example.com",
    ]);
    expect(printed).to.deep.equal({
      app_id: appId,
      rp_id: "example.com",
      origins: ["https://example.com", "https://login.example.com:8443"],
    });
    expect(await relyingParty(appId)).to.deep.equal({
      rpId: "example.com",
      origins: ["https://example.com", "https://login.example.com:8443"],
    });
    expect((await rig.loginOptions(appId)).options.rpId).to.equal("example.com");
    const u = await userWithPasskey(appId, "https://login.example.com:8443");
    const logged = await rig.login(appId, (o) => u.auth.get(o, { origin: "https://example.com" }));
    expect(logged.status, JSON.stringify(logged.body)).to.equal(200);
  });

  it("replaces the relying party when set again: passkeys of the earlier RP ID stop working", async () => {
    const appId = await newApp();
    await ok(["passkeys", appId, "--rp-id", "example.com", "--origins", "https://example.com"]);
    const u = await userWithPasskey(appId, "https://example.com");
    const printed = await ok([
      "passkeys",
      appId,
      "--rp-id",
      "auth.example.net",
      "--origins",
      "https://auth.example.net",
    ]);
    expect(printed).to.deep.equal({
      app_id: appId,
      rp_id: "auth.example.net",
      origins: ["https://auth.example.net"],
    });
    expect(await relyingParty(appId)).to.deep.equal({
      rpId: "auth.example.net",
      origins: ["https://auth.example.net"],
    });
    expect((await rig.loginOptions(appId)).options.rpId).to.equal("auth.example.net");
    expect((await rig.creationOptions(u)).rp).to.deep.include({ id: "auth.example.net" });
    const old = await rig.login(appId, (o) => u.auth.get(o, { origin: "https://example.com" }));
    expect(old.status, JSON.stringify(old.body)).to.equal(401);
    const fresh = await userWithPasskey(appId, "https://auth.example.net");
    expect(
      (await rig.login(appId, (o) => fresh.auth.get(o, { origin: "https://auth.example.net" }))).status,
    ).to.equal(200);
  });

  it("takes localhost, with http origins on it or under it", async () => {
    const appId = await newApp();
    const origins = ["http://localhost:3000", "https://localhost", "http://app.localhost:8080"];
    expect(
      await ok(["passkeys", appId, "--rp-id", "localhost", "--origins", origins.join(",")]),
    ).to.deep.equal({
      app_id: appId,
      rp_id: "localhost",
      origins,
    });
  });

  it("refuses bad input with exit 2 and one line naming the option (or the unknown app), writing nothing", async () => {
    const appId = await newApp();
    await ok(["passkeys", appId, "--rp-id", "example.com", "--origins", "https://example.com"]);
    const stored = await relyingParty(appId);
    const prefix = rig.app.config.REDIS_KEY_PREFIX;
    const before = await keysUnder(rig.app.registry.redis, prefix);
    const good = { rpId: "example.com", origins: "https://login.example.com" };
    const tooMany = Array.from({ length: 21 }, (_, i) => `https://o${i}.example.com`).join(",");
    const cases: [string, { app?: string; rpId?: string; origins?: string }, string][] = [
      ["an uppercase RP ID", { rpId: "Example.com" }, "--rp-id"],
      ["an RP ID with a scheme", { rpId: "https://example.com" }, "--rp-id"],
      ["an RP ID with a port", { rpId: "example.com:443" }, "--rp-id"],
      ["an RP ID with a path", { rpId: "example.com/login" }, "--rp-id"],
      ["an IP address", { rpId: "192.168.0.1" }, "--rp-id"],
      ["an empty RP ID", { rpId: "" }, "--rp-id"],
      ["a label starting with a hyphen", { rpId: "-bad.example.com" }, "--rp-id"],
      ["an origin that is not a URL", { origins: "not a url" }, "--origins"],
      ["an origin with a path", { origins: "https://example.com/login" }, "--origins"],
      ["http on a host other than localhost", { origins: "http://example.com" }, "--origins"],
      ["another scheme", { origins: "ftp://example.com" }, "--origins"],
      ["an origin with credentials", { origins: "https://user:pw@example.com" }, "--origins"],
      ["an origin outside the RP ID", { origins: "https://example.org" }, "--origins"],
      ["a host that only ends like the RP ID", { origins: "https://notexample.com" }, "--origins"],
      ["a bad origin after a good one", { origins: "https://example.com,https://evil.com" }, "--origins"],
      ["no origin", { origins: "" }, "--origins"],
      ["only commas", { origins: " , ," }, "--origins"],
      ["21 origins", { origins: tooMany }, "--origins"],
      ["http localhost under another RP ID", { origins: "http://localhost:3000" }, "--origins"],
      ["an unknown app", { app: "app_doesnotexist" }, "no app app_doesnotexist"],
    ];
    for (const [what, c, mentions] of cases) {
      const r = await run([
        "passkeys",
        c.app ?? appId,
        "--rp-id",
        c.rpId ?? good.rpId,
        "--origins",
        c.origins ?? good.origins,
      ]);
      expect(r.code, `${what}: ${r.stderr}`).to.equal(2);
      expect(r.stdout, what).to.equal("");
      expect(r.stderr.trim().split("\n"), what).to.have.length(1);
      expect(r.stderr, what).to.match(new RegExp(`^ringfence: ${mentions}`));
      expect(await relyingParty(appId), what).to.deep.equal(stored);
    }
    for (const [args, mentions] of [
      [["passkeys", appId, "--origins", "https://example.com"], "--rp-id"],
      [["passkeys", appId, "--rp-id", "example.com"], "--origins"],
    ] as const) {
      const r = await run([...args]);
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stderr, mentions).to.include(mentions);
    }
    expect(await keysUnder(rig.app.registry.redis, prefix)).to.deep.equal(before);
    expect(await relyingParty("app_doesnotexist")).to.equal(undefined);
  });
});
