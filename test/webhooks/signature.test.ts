import { expect } from "chai";
import { createHmac } from "node:crypto";
import { signWebhook, verifyWebhook } from "../../src/webhooks/signature.js";

describe("webhook signature", () => {
  const secret = "whsec_test";
  const body = '{"id":"e1","type":"attempt","created_at":"2025-01-01T00:00:00.000Z","payload":{}}';
  const t = 1_760_000_000;

  it("is t=<unix>,v1=<hex HMAC-SHA256 of t.body> keyed by the secret", () => {
    const expected = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
    expect(signWebhook(secret, body, t)).to.equal(`t=${t},v1=${expected}`);
    expect(signWebhook(secret, Buffer.from(body), t)).to.equal(`t=${t},v1=${expected}`);
  });

  it("verifies within the tolerance, and refuses another secret, body, time or a malformed header", () => {
    const header = signWebhook(secret, body, t);
    expect(verifyWebhook(secret, body, header, 300, t + 300)).to.equal(true);
    expect(verifyWebhook(secret, Buffer.from(body), header, 300, t - 300)).to.equal(true);
    expect(verifyWebhook(secret, body, header, 300, t + 301)).to.equal(false);
    expect(verifyWebhook("whsec_other", body, header, 300, t)).to.equal(false);
    expect(verifyWebhook(secret, body.replace("e1", "e2"), header, 300, t)).to.equal(false);
    expect(verifyWebhook(secret, body, header.replace(`t=${t}`, `t=${t + 1}`), 300, t)).to.equal(false);
    for (const bad of [
      undefined,
      null,
      "",
      "v1=00",
      `t=${t}`,
      `t=${t},v1=zz`,
      `t=x,${header.split(",")[1]}`,
    ]) {
      expect(verifyWebhook(secret, body, bad, 300, t), String(bad)).to.equal(false);
    }
  });

  it("accepts a header with several v1 signatures when one matches (secret rotation)", () => {
    const header = signWebhook(secret, body, t);
    const other = signWebhook("whsec_old", body, t).split(",")[1] ?? "";
    expect(verifyWebhook(secret, body, `${header},${other}`, 300, t)).to.equal(true);
    expect(verifyWebhook("whsec_old", body, `${header},${other}`, 300, t)).to.equal(true);
    expect(verifyWebhook("whsec_third", body, `${header},${other}`, 300, t)).to.equal(false);
  });
});
