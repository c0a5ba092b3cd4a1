import { expect } from "chai";
import { cliEnv, runCli } from "../support/app.js";
import { FraudRig, frNumber } from "../support/fraud.js";
import { waitFor } from "../support/redis.js";
import { rest } from "../support/rest.js";
import { PWD, reviewEntry } from "../support/stepup.js";

describe("fraud engine: session login and step-up SMS codes (docs/fraud.md)", () => {
  let rig: FraudRig;
  let appId: string;
  before(async function () {
    this.timeout(30_000);
    // The documented defaults without the share of the busiest day, so that each right code
    // earns exactly FRAUD_CONVERSION_CREDIT (2) sends.
    rig = await FraudRig.start({ FRAUD_BASELINE_SHARE: "0" });
    const made = await runCli(["apps", "create", "--name", "Shop"], cliEnv(rig.app.config));
    const created = JSON.parse(made.stdout) as Record<string, string>;
    appId = created.app_id ?? "";
    const mgmt = created.management_api_key ?? "";
    expect(
      (await call("POST", `/v2/session/apps/${appId}/config/scopes`, { scope: PWD }, mgmt)).status,
    ).to.equal(200);
    const stepup = {
      jwks_url: "",
      step_keys: [],
      allowed_scopes: [reviewEntry("phone_number", "verify_sms")],
    };
    expect((await call("POST", `/v2/session/apps/${appId}/config/stepup`, stepup, mgmt)).status).to.equal(
      201,
    );
  });
  after(async () => rig.stop());

  function call(method: string, path: string, body?: unknown, bearer?: string) {
    return rest(rig.app.baseUrl).call(method, path, { body, bearer });
  }

  const startLogin = (phone: string) =>
    call("POST", "/v1/session/login/otp", {
      app_id: appId,
      identifier: { type: "phone_number", value: phone },
    });

  it("answers 403 spam_detected to a login code the engine blocks, sends a returning user's step-up code, and a right login code earns the app more sends", async function () {
    this.timeout(30_000);
    // A user logs in (1 send, converted), then 11 logins nobody finishes fill the new destination.
    const user = frNumber("bouygues", 0);
    const first = await startLogin(user);
    expect(first.status).to.equal(200);
    const session = await call("POST", "/v1/session/login/otp/check", {
      challenge_token: first.body.challenge_token,
      code: await rig.codeTo(user),
    });
    expect(session.status, session.text).to.equal(200);
    const pending: { phone: string; token: string }[] = [];
    for (let i = 1; i <= 11; i++) {
      const r = await startLogin(frNumber("bouygues", i));
      expect(r.status, `login ${i}: ${r.text}`).to.equal(200);
      pending.push({ phone: frNumber("bouygues", i), token: String(r.body.challenge_token) });
    }

    const blocked = await startLogin(frNumber("bouygues", 12));
    expect(blocked.status).to.equal(403);
    expect(blocked.body.code).to.equal("spam_detected");
    expect(rig.smsTo(frNumber("bouygues", 12))).to.equal(0);

    // The user converted: a returning user, whom no adaptive rule refuses (decisions 9.4).
    const smsToUser = rig.smsTo(user);
    const stepUp = await call(
      "POST",
      "/v1/session/stepup/request",
      { scope: PWD },
      String(session.body.access_token),
    );
    expect(stepUp.status, stepUp.text).to.equal(200);
    await waitFor(async () => Promise.resolve(rig.smsTo(user) === smsToUser + 1));

    // A late right code of one of the pending logins converts: two more sends.
    const late = pending[0];
    if (late === undefined) throw new Error("no login");
    const done = await call("POST", "/v1/session/login/otp/check", {
      challenge_token: late.token,
      code: await rig.codeTo(late.phone),
    });
    expect(done.status).to.equal(200);
    // (The returning user's step-up send counted among the destination's sends.)
    expect((await startLogin(frNumber("bouygues", 13))).status).to.equal(200);
    expect((await startLogin(frNumber("bouygues", 14))).status).to.equal(403);

    const recorded = await rig.app.registry.redis.xrange(
      rig.app.registry.fraud.keys.decisions(appId),
      "-",
      "+",
    );
    expect(recorded.map(([, f]) => f[f.indexOf("api") + 1])).to.deep.equal(["session", "session"]);
  });
});
