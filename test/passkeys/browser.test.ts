/**
 * Passkeys end to end in a real browser (docs/session-api.md#passkeys): headless Chromium runs the
 * WebAuthn ceremonies in a web page, with its virtual authenticator, against the running service.
 * The page calls the API on its own origin, through the page server's pass-through to the service.
 */
import { expect } from "chai";
import { decodeJwt } from "jose";
import type { Browser, CDPSession, Page } from "puppeteer-core";
import { PasskeyStore } from "../../src/passkeys/store.js";
import { hashPassword } from "../../src/session/password.js";
import { cliEnv, runCli, startTestApp, type TestApp } from "../support/app.js";
import { launchChromium, startPageServer, type PageServer } from "../support/browser.js";
import { rest, type Json } from "../support/rest.js";

/**
 * The web app: a login form's worth of script. It keeps its session's access token as a web app
 * would, and each function answers what the service answered ({status, body, text}).
 */
const PAGE = `<!doctype html>
<html lang="en">
<meta charset="utf-8">
<title>Passkeys</title>
<script>
"use strict";
let accessToken = null;

async function api(method, path, body, authenticated) {
  const headers = { "content-type": "application/json" };
  if (authenticated) headers.authorization = "Bearer " + accessToken;
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    // an empty answer (204)
  }
  return { status: res.status, body: parsed, text };
}

function keepSession(answer) {
  if (answer.status === 200) accessToken = answer.body.access_token;
  return answer;
}

window.ringfence = {
  async loginWithPassword(appId, email, password) {
    const identifier = { type: "email_address", value: email };
    return keepSession(await api("POST", "/v1/session/login/password", { app_id: appId, identifier, password }));
  },
  async registerPasskey() {
    const options = await api("POST", "/v1/session/me/passkeys/options", {}, true);
    if (options.status !== 200) return options;
    const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options.body.options);
    const credential = await navigator.credentials.create({ publicKey });
    return api("POST", "/v1/session/me/passkeys", { credential: credential.toJSON() }, true);
  },
  async logout() {
    const answer = await api("POST", "/v1/session/logout", {}, true);
    if (answer.status === 204) accessToken = null;
    return answer;
  },
  async loginWithPasskey(appId) {
    const start = await api("POST", "/v1/session/login/passkey/options", { app_id: appId });
    if (start.status !== 200) return start;
    const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(start.body.options);
    const credential = await navigator.credentials.get({ publicKey });
    const body = { challenge_token: start.body.challenge_token, credential: credential.toJSON() };
    return keepSession(await api("POST", "/v1/session/login/passkey", body));
  },
};
</script>
</html>
`;

interface PageAnswer {
  status: number;
  body: Json;
  text: string;
}

type PageCall = "loginWithPassword" | "registerPasskey" | "logout" | "loginWithPasskey";

const EMAIL = "browser@example.com";
const PASSWORD = "correct horse battery";

describe("passkeys in headless Chromium with a virtual authenticator", () => {
  let app: TestApp | undefined;
  /** The app's web origin, in the app's passkey origins. */
  let site: PageServer | undefined;
  /** Another origin on the same RP ID (localhost), not in the app's origins. */
  let stranger: PageServer | undefined;
  let browser: Browser | undefined;
  let page: Page;
  /** Uncaught errors of the page's script since it was last opened. */
  const pageErrors: string[] = [];
  let cdp: CDPSession;
  let authenticatorId: string;
  let appId: string;
  let userId: string;
  let store: PasskeyStore;

  before(async function () {
    this.timeout(60_000);
    const started = (app = await startTestApp());
    store = new PasskeyStore(started.registry.redis, started.registry.keys);
    site = await startPageServer(PAGE, started.baseUrl);
    stranger = await startPageServer(PAGE, started.baseUrl);
    appId = (await started.registry.apps.create("Browser")).app.appId;
    const passkeys = await runCli(
      ["apps", "passkeys", appId, "--rp-id", "localhost", "--origins", site.origin],
      cliEnv(started.config),
      true,
    );
    expect(passkeys.code, passkeys.stderr).to.equal(0);
    expect(JSON.parse(passkeys.stdout)).to.deep.equal({
      app_id: appId,
      rp_id: "localhost",
      origins: [site.origin],
    });
    const user = await started.registry.users.create(
      appId,
      [{ type: "email_address", value: EMAIL }],
      await hashPassword(PASSWORD),
    );
    userId = user!.userId;

    browser = await launchChromium();
    page = await browser.newPage();
    page.on("pageerror", (err) => {
      pageErrors.push(err instanceof Error ? err.message : String(err));
    });
    cdp = await page.createCDPSession();
    await cdp.send("WebAuthn.enable");
    ({ authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: {
        protocol: "ctap2",
        transport: "internal",
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    }));
  });

  after(async () => {
    // The authenticator lives with the tab: it goes when the browser does.
    try {
      await browser?.close();
    } finally {
      await site?.close();
      await stranger?.close();
      await app?.stop();
    }
  });

  /** Calls one of the page's functions, in the page, and returns what the service answered it. */
  function inPage(call: PageCall, ...args: string[]): Promise<PageAnswer> {
    return page.evaluate(
      (name, a) =>
        (globalThis as unknown as { ringfence: Record<string, (...x: string[]) => Promise<PageAnswer>> })
          .ringfence[name]!(...a),
      call,
      args,
    );
  }

  /** Opens the page on `origin`: its inline script has run once the page has loaded. */
  async function open(origin: string): Promise<void> {
    pageErrors.length = 0;
    await page.goto(`${origin}/`, { waitUntil: "load" });
    const ready = await page.evaluate(() => "ringfence" in globalThis);
    expect(ready, `the page's script did not run: ${pageErrors.join("; ")}`).to.equal(true);
  }

  async function authenticatorCredentials(): Promise<{ id: string; signCount: number; rpId?: string }[]> {
    const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    // The protocol sends bytes in base64; WebAuthn's JSON and the service, in base64url.
    return credentials.map((c) => ({
      id: Buffer.from(c.credentialId, "base64").toString("base64url"),
      signCount: c.signCount,
      rpId: c.rpId,
    }));
  }

  /** The user logs in with a password on the app's origin and registers a passkey: once, for every test. */
  let registration: Promise<PageAnswer> | undefined;
  function registered(): Promise<PageAnswer> {
    registration ??= (async () => {
      await open(site!.origin);
      const login = await inPage("loginWithPassword", appId, EMAIL, PASSWORD);
      expect(login.status, login.text).to.equal(200);
      return inPage("registerPasskey");
    })();
    return registration;
  }

  it("registers a passkey in the page, then logs in with it: amr swk and mfa, acr 2", async () => {
    const created = await registered();
    expect(created.status, created.text).to.equal(201);
    const passkeyId = String(created.body.id);
    const credentials = await authenticatorCredentials();
    expect(
      credentials.map((c) => c.id),
      "the authenticator holds the credential the service registered",
    ).to.deep.equal([passkeyId]);
    const [held] = credentials;
    expect(held?.rpId).to.equal("localhost");
    const atRegistration = await store.get(userId, passkeyId);
    expect(atRegistration?.counter).to.equal(held?.signCount);
    expect(atRegistration?.lastUsedAt).to.equal(undefined);

    const out = await inPage("logout");
    expect(out.status, out.text).to.equal(204);

    const loginStarted = Date.now();
    const login = await inPage("loginWithPasskey", appId);
    expect(login.status, login.text).to.equal(200);
    const accessToken = String(login.body.access_token);
    const claims = decodeJwt(accessToken);
    expect(claims.sub).to.equal(userId);
    expect(claims.amr).to.deep.equal(["swk", "mfa"]);
    expect(claims.acr).to.equal("2");

    const listed = await rest(app!.baseUrl).call("GET", "/v1/session/me/passkeys", { bearer: accessToken });
    expect(listed.status, listed.text).to.equal(200);
    const passkeys = listed.body.passkeys as { id: string; created_at: string; last_used_at?: string }[];
    expect(passkeys.map((p) => p.id)).to.deep.equal([passkeyId]);
    expect(passkeys[0]?.last_used_at, listed.text).to.be.a("string");
    expect(Date.parse(passkeys[0]!.last_used_at!)).to.be.at.least(loginStarted - 1_000);

    // The counter the authenticator signed with at the login is the one the service kept.
    const [afterLogin] = await authenticatorCredentials();
    expect(afterLogin?.id).to.equal(passkeyId);
    expect(afterLogin?.signCount).to.be.above(atRegistration!.counter);
    expect((await store.get(userId, passkeyId))?.counter).to.equal(afterLogin?.signCount);
  });

  it("refuses the same passkey from a page on an origin the app does not name: 401 invalid_credentials", async () => {
    const created = await registered();
    expect(created.status, created.text).to.equal(201);
    const passkeyId = String(created.body.id);
    const kept = await store.get(userId, passkeyId);

    await open(stranger!.origin);
    const login = await inPage("loginWithPasskey", appId);
    expect(login.status, login.text).to.equal(401);
    expect(login.body).to.deep.equal({
      code: "invalid_credentials",
      message: "the passkey was not accepted",
    });

    // The browser did use the credential (RP ID localhost covers both origins); nothing changed.
    const [held] = await authenticatorCredentials();
    expect(held?.id).to.equal(passkeyId);
    expect(held?.signCount).to.be.above(kept!.counter);
    expect(await store.get(userId, passkeyId)).to.deep.equal(kept);
  });
});
