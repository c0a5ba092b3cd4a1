import { expect } from "chai";
import { createHmac, randomBytes } from "node:crypto";
import { Secrets } from "../../src/crypto/secrets.js";

describe("Secrets: keyed hashes of what is only ever compared", () => {
  const key = randomBytes(32);
  const secrets = new Secrets(key);
  /** The construction hashes stored in Redis were made with: each kept one must still match. */
  const stored = (purpose: string, secret: string) =>
    createHmac("sha256", createHmac("sha256", key).update("ringfence/hash").digest())
      .update(purpose)
      .update("\0")
      .update(secret)
      .digest("hex");

  it("hashes as the stored hashes were made, for ASCII and non-ASCII secrets", () => {
    for (const [purpose, secret] of [
      ["oauth-client-secret", "rfs_abcdefghijklmnopqrstuvwxyz012345"],
      ["api-key", "ünïcødé ✓ key"],
      ["otp", ""],
    ] as const) {
      expect(secrets.hash(purpose, secret)).to.equal(stored(purpose, secret));
      expect(secrets.matches(purpose, secret, stored(purpose, secret))).to.equal(true);
    }
  });

  it("matches nothing else: another secret, another purpose, a cut or malformed hash", () => {
    const hash = stored("oauth-client-secret", "right");
    expect(secrets.matches("oauth-client-secret", "wrong", hash)).to.equal(false);
    expect(secrets.matches("api-key", "right", hash)).to.equal(false);
    expect(secrets.matches("oauth-client-secret", "right", hash.slice(0, 62))).to.equal(false);
    expect(secrets.matches("oauth-client-secret", "right", `zz${hash.slice(2)}`)).to.equal(false);
    expect(secrets.matches("oauth-client-secret", "right", "")).to.equal(false);
  });
});
