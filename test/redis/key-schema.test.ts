import { expect } from "chai";
import { Keys } from "../../src/redis/client.js";
import { AccountKeys } from "../../src/accounts/keys.js";
import { WindowKeys } from "../../src/otp/keys.js";
import { VerifyKeys } from "../../src/verify/keys.js";
import { DeliveryKeys } from "../../src/delivery/keys.js";

// Stored keys keep their names: rows, holds and accounts written before must still be found.
describe("key schema", () => {
  const keys = new Keys("rf:");

  it("names accounts as they were stored", () => {
    const a = new AccountKeys(keys);
    expect(a.account("c1")).to.equal("rf:acct:{c1}");
    expect(a.spend("c1", "2026-11")).to.equal("rf:acct:{c1}:spend:2026-11");
    expect(a.apiKey("h")).to.equal("rf:apikey:{h}");
    expect(a.allAccounts()).to.equal("rf:acct:{*}");
    expect(a.changes()).to.equal("rf:changed:{accounts}");
  });

  it("names routes and delivery counters each under its own hash tag (docs/capacity.md#delivery-counters)", () => {
    const d = new DeliveryKeys(keys);
    expect(d.routes()).to.equal("rf:routes:{table}");
    expect(d.routeChanges()).to.equal("rf:changed:{routes}");
    expect(d.hourly("sms", 493_000)).to.equal("rf:dstat:{sms:493000}");
    expect(d.conversion("sms", "FR", 12)).to.equal("rf:rconv:{sms:FR}:12");
  });

  it("names verifications, holds and their indexes as they were stored", () => {
    const v = new VerifyKeys(keys);
    expect(v.auth("c1", "a1")).to.deep.equal({
      auth: "rf:auth:{c1}:a1",
      events: "rf:auth:{c1}:a1:events",
      hook: "rf:auth:{c1}:a1:events:hook",
      pending: "rf:whpending:{c1}",
      message: "rf:auth:{c1}:a1:msg",
    });
    const place = {
      customer: "c1",
      auth: "a1",
      phone: "+1",
      ip: "ip",
      device: "d",
      range: "+12",
      month: "m",
    };
    expect(v.place(place)).to.include({
      account: "rf:acct:{c1}",
      spend: "rf:acct:{c1}:spend:m",
      numberWindow: "rf:rl:{c1}:num:+1",
      ipWindow: "rf:rl:{c1}:ip:ip",
      deviceWindow: "rf:rl:{c1}:dev:d",
      accountWindow: "rf:rl:{c1}:acct",
      ipNumbers: "rf:spam:{c1}:ipnums:ip",
      deviceNumbers: "rf:spam:{c1}:devnums:d",
      range: "rf:spam:{c1}:range:+12",
    });
    expect(v.target("c1", "+1")).to.equal("rf:v2target:{c1}:+1");
    expect(v.holdIndex()).to.equal("rf:holds:{index}:listed");
    expect(v.earlierHoldIndex()).to.equal("rf:holds:{index}");
    expect(v.holds("c1")).to.equal("rf:holds:{c1}");
    expect(v.hold("c1", "h1")).to.equal("rf:hold:{c1}:h1");
    expect(v.messageRef("smpp", "p1")).to.equal("rf:smsref:{p1}:smpp");
    expect(v.legacyMessageRef("p1")).to.equal("rf:smsref:{p1}");
    expect(v.feedback("c1", "+1")).to.equal("rf:fb:{c1}:+1");
  });

  it("builds every rate-limit window key in one module, under the names they had", () => {
    const w = new WindowKeys(keys);
    expect(w.appTag("app")).to.equal("rf:rl:{app}");
    expect(w.loginIdentifier("app", "email", "A@B.C")).to.equal("rf:rl:{app}:ident:email:a@b.c");
    expect(w.login("app")).to.equal("rf:rl:{app}:login");
    expect(w.loginAddress("app", "1.2.3.4")).to.equal("rf:rl:{app}:login-ip:1.2.3.4");
    expect(w.range("app", "+3361")).to.equal("rf:rl:{app}:range:+3361");
    expect(w.identifierChecks("app", "email", "A@B.C")).to.equal("rf:rl:{app}:checks:email:a@b.c");
    expect(w.userChecks("u")).to.equal("rf:rl:{u}:checks");
    expect(w.stepUp("u")).to.equal("rf:rl:{u}:stepup");
    expect(w.stepUp("u", "s")).to.equal("rf:rl:{u}:stepup:s");
    expect(w.hookCalls("u")).to.equal("rf:rl:{u}:hook");
    expect(w.hookCalls("u", "s")).to.equal("rf:rl:{u}:hook:s");
    expect(w.clientTokenFailures("dg")).to.equal("rf:rl:{client:dg}:token-failures");
    expect(w.addressTokenFailures("1.2.3.4")).to.equal("rf:rl:{ip:1.2.3.4}:token-failures");
    expect(w.apiKeyFailures("1.2.3.4")).to.equal("rf:rl:{ip:1.2.3.4}:apikey-failures");
    expect(w.statusTokenFailures("1.2.3.4")).to.equal("rf:rl:{ip:1.2.3.4}:status-token-failures");
  });
});
