import { expect } from "chai";
import { cliEnv, runCli, startTestApp, type TestApp } from "../support/app.js";
import { sample } from "../support/metrics.js";
import { SmsReceiver } from "../support/receivers.js";
import { waitFor } from "../support/redis.js";
import { rest, type RestAnswer } from "../support/rest.js";

interface Tokens {
  access_token: string;
  refresh_token: string;
}

/**
 * A session of a fresh app of `app`, logged in by an SMS code: its first tokens, and how to refresh.
 * Each test has its own app, so none sees another's sessions.
 */
async function session(app: TestApp, sms: SmsReceiver, phone: string) {
  const made = JSON.parse(
    (await runCli(["apps", "create", "--name", "Grace"], cliEnv(app.config))).stdout,
  ) as {
    app_id: string;
  };
  const call = (path: string, body: unknown, bearer?: string) =>
    rest(app.baseUrl).call(bearer === undefined ? "POST" : "GET", path, { body, bearer });
  const before = sms.messages.length;
  const started = await call("/v1/session/login/otp", {
    app_id: made.app_id,
    identifier: { type: "phone_number", value: phone },
  });
  expect(started.status, started.text).to.equal(200);
  await sms.receiver.until((r) => r.slice(before).some((x) => x.body.includes(phone)));
  const code = SmsReceiver.code(sms.messages.slice(before).find((m) => m.to === phone) ?? sms.messages[0]!);
  const checked = await call("/v1/session/login/otp/check", {
    challenge_token: started.body.challenge_token,
    code,
  });
  expect(checked.status, checked.text).to.equal(200);
  return {
    first: checked.body as unknown as Tokens,
    refresh: (token: string): Promise<RestAnswer> =>
      rest(app.baseUrl).call("POST", "/v1/session/refresh", { body: { refresh_token: token } }),
    me: (accessToken: string) => rest(app.baseUrl).call("GET", "/v1/session/me", { bearer: accessToken }),
  };
}

/** `ringfence_refresh_reuses_total{outcome}` of `app`. */
async function reuses(app: TestApp, outcome: "grace" | "revoked"): Promise<number> {
  return sample((await app.registry.metrics.exposition()).body, "ringfence_refresh_reuses_total", {
    outcome,
  });
}

/**
 * docs/session-api.md#refresh (9.5, row "Refresh reuse grace"): a refresh token presented again
 * within REFRESH_REUSE_GRACE_SECONDS of its first use answers that use's tokens again, byte for
 * byte, concurrent presentations included, while the successor is unused; after the grace, or once
 * the successor was used, a reuse revokes the session; 0 keeps that strict rule.
 */
describe("session refresh: a reuse within the grace answers the same tokens (9.5)", () => {
  let sms: SmsReceiver;
  let phoneSeq = 612_500_000;
  const fresh = () => `+33${(phoneSeq += 1000)}`;
  const apps: TestApp[] = [];
  const start = async (grace: string) => {
    const app = await startTestApp({
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: sms.url,
      REFRESH_REUSE_GRACE_SECONDS: grace,
    });
    apps.push(app);
    return app;
  };

  before(async () => {
    sms = await SmsReceiver.start();
  });
  after(async () => {
    for (const app of apps) await app.stop();
    await sms.close();
  });

  describe("with the default grace (30 s)", () => {
    let app: TestApp;
    before(async () => {
      app = await start("30");
    });

    it("answers a second presentation with the first answer, byte for byte; the successor still works", async () => {
      const s = await session(app, sms, fresh());
      const graced = await reuses(app, "grace");
      const first = await s.refresh(s.first.refresh_token);
      expect(first.status, first.text).to.equal(200);
      const again = await s.refresh(s.first.refresh_token);
      expect(again.status, again.text).to.equal(200);
      expect(again.text, "byte for byte").to.equal(first.text);
      expect(await reuses(app, "grace")).to.equal(graced + 1);
      // The session lives on, and its successor refreshes as usual.
      expect((await s.me(String(first.body.access_token))).status).to.equal(200);
      const next = await s.refresh(String(first.body.refresh_token));
      expect(next.status, next.text).to.equal(200);
      expect((await s.me(String(next.body.access_token))).status).to.equal(200);
    });

    it("gives five concurrent presentations one successor, the same answer each", async () => {
      const s = await session(app, sms, fresh());
      const answers = await Promise.all(Array.from({ length: 5 }, () => s.refresh(s.first.refresh_token)));
      for (const a of answers) expect(a.status, a.text).to.equal(200);
      expect(new Set(answers.map((a) => a.text)).size, "one answer").to.equal(1);
      const successor = String(answers[0]?.body.refresh_token);
      expect(successor).to.not.equal(s.first.refresh_token);
      expect((await s.refresh(successor)).status).to.equal(200);
    });

    it("revokes the session when the token comes back after its successor was used", async () => {
      const s = await session(app, sms, fresh());
      const revoked = await reuses(app, "revoked");
      const first = await s.refresh(s.first.refresh_token);
      const second = await s.refresh(String(first.body.refresh_token));
      expect(second.status).to.equal(200);
      const reuse = await s.refresh(s.first.refresh_token);
      expect(reuse.status, reuse.text).to.equal(401);
      expect(reuse.body).to.include({ code: "invalid_token" });
      expect(await reuses(app, "revoked")).to.equal(revoked + 1);
      expect((await s.me(String(second.body.access_token))).status, "the session is over").to.equal(401);
      expect((await s.refresh(String(second.body.refresh_token))).status).to.equal(401);
    });
  });

  it("revokes the session on a reuse after the grace (REFRESH_REUSE_GRACE_SECONDS 1)", async () => {
    const app = await start("1");
    const s = await session(app, sms, fresh());
    const usedAt = Date.now();
    const first = await s.refresh(s.first.refresh_token);
    expect(first.status).to.equal(200);
    // The grace is a second of the service's clock: past it, the token is a stolen one's replay.
    await waitFor(() => Promise.resolve(Date.now() - usedAt > 1_200), 5_000);
    const reuse = await s.refresh(s.first.refresh_token);
    expect(reuse.status, reuse.text).to.equal(401);
    expect((await s.me(String(first.body.access_token))).status).to.equal(401);
  });

  it("keeps the strict rule with REFRESH_REUSE_GRACE_SECONDS 0: any reuse revokes the session", async () => {
    const app = await start("0");
    const s = await session(app, sms, fresh());
    const first = await s.refresh(s.first.refresh_token);
    expect(first.status).to.equal(200);
    const reuse = await s.refresh(s.first.refresh_token);
    expect(reuse.status, reuse.text).to.equal(401);
    expect((await s.me(String(first.body.access_token))).status).to.equal(401);
    expect((await s.refresh(String(first.body.refresh_token))).status).to.equal(401);
  });
});
