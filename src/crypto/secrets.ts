import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createSecretKey,
  randomBytes,
  timingSafeEqual,
  type KeyObject,
} from "node:crypto";

/**
 * Secrets are never stored in clear: what is only ever compared (API keys, client secrets,
 * codes) is kept as an HMAC keyed by SECRETS_KEY; what must be used again (webhook secrets,
 * signing keys) is encrypted with AES-256-GCM under a key derived from it.
 */
export class Secrets {
  /** Imported once: an HMAC per presented secret then skips the key's import. */
  private readonly hashKey: KeyObject;
  private readonly encKey: Buffer;
  /**
   * The key check value: an HMAC of a fixed label under SECRETS_KEY, stored beside the data so
   * that another key is told apart at start (src/crypto/key-check.ts); it reveals nothing of the key.
   */
  readonly checkValue: string;

  constructor(secretsKey: Buffer) {
    if (secretsKey.length !== 32) throw new Error("SECRETS_KEY must be 32 bytes");
    this.hashKey = createSecretKey(createHmac("sha256", secretsKey).update("ringfence/hash").digest());
    this.encKey = createHmac("sha256", secretsKey).update("ringfence/encrypt").digest();
    this.checkValue = createHmac("sha256", secretsKey).update("ringfence/key-check").digest("hex");
  }

  /** Keyed hash of a secret, hex; `purpose` keeps hashes of different kinds apart. */
  hash(purpose: string, secret: string): string {
    return this.digest(purpose, secret).toString("hex");
  }

  /** Compares a presented secret with a stored hash in constant time. */
  matches(purpose: string, secret: string, storedHash: string): boolean {
    const a = this.digest(purpose, secret);
    const b = Buffer.from(storedHash, "hex");
    return a.length === b.length && timingSafeEqual(a, b);
  }

  /** HMAC-SHA256 of `<purpose>\0<secret>` (UTF-8) under the hash key. */
  private digest(purpose: string, secret: string): Buffer {
    return createHmac("sha256", this.hashKey).update(`${purpose}\0${secret}`).digest();
  }

  encrypt(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.encKey, iv);
    const data = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return [
      "v1",
      iv.toString("base64url"),
      data.toString("base64url"),
      cipher.getAuthTag().toString("base64url"),
    ].join(".");
  }

  decrypt(sealed: string): string {
    const [version, iv, data, tag] = sealed.split(".");
    if (version !== "v1" || iv === undefined || data === undefined || tag === undefined) {
      throw new Error("unreadable encrypted value");
    }
    const decipher = createDecipheriv("aes-256-gcm", this.encKey, Buffer.from(iv, "base64url"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(data, "base64url")), decipher.final()]).toString(
      "utf8",
    );
  }
}

/** A high-entropy secret: `prefix_` then 32 random bytes in base64url. */
export function newSecret(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString("base64url")}`;
}
