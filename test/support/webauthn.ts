/**
 * A software authenticator for tests: it answers WebAuthn creation and request options as a
 * platform authenticator would (ES256 keys, attestation "none", a signature counter), with knobs
 * for what a test needs to get wrong: the origin, the RP ID, user verification, the counter.
 */
import { createHash, generateKeyPairSync, sign, type KeyObject } from "node:crypto";

type Json = Record<string, unknown>;

/** CBOR (RFC 8949) of what WebAuthn needs: integers, byte and text strings, maps. */
export function cbor(value: unknown): Buffer {
  const head = (major: number, n: number): Buffer => {
    if (n < 24) return Buffer.from([(major << 5) | n]);
    if (n < 0x100) return Buffer.from([(major << 5) | 24, n]);
    if (n < 0x10000) {
      const b = Buffer.alloc(3);
      b[0] = (major << 5) | 25;
      b.writeUInt16BE(n, 1);
      return b;
    }
    const b = Buffer.alloc(5);
    b[0] = (major << 5) | 26;
    b.writeUInt32BE(n, 1);
    return b;
  };
  if (typeof value === "number") {
    if (!Number.isInteger(value)) throw new Error("cbor: integers only");
    return value >= 0 ? head(0, value) : head(1, -1 - value);
  }
  if (typeof value === "string") {
    const bytes = Buffer.from(value, "utf8");
    return Buffer.concat([head(3, bytes.length), bytes]);
  }
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), Buffer.from(value)]);
  if (value instanceof Map) {
    const parts = [head(5, value.size)];
    for (const [k, v] of value) parts.push(cbor(k), cbor(v));
    return Buffer.concat(parts);
  }
  if (typeof value === "object" && value !== null) return cbor(new Map(Object.entries(value)));
  throw new Error(`cbor: cannot encode ${typeof value}`);
}

const b64url = (b: Uint8Array | string) => Buffer.from(b).toString("base64url");
const sha256 = (b: Uint8Array | string) => createHash("sha256").update(b).digest();

/** Authenticator data flags (WebAuthn section 6.1). */
const UP = 0x01;
const UV = 0x04;
const AT = 0x40;

export interface SoftCredential {
  id: string;
  rpId: string;
  userHandle: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
  counter: number;
}

export interface Ceremony {
  /** The page's origin the browser would write in clientDataJSON. */
  origin: string;
  /** The RP ID the authenticator scopes to; default the options' (creation) or the credential's. */
  rpId?: string;
  /** Whether the authenticator verified the user (UV flag); default true. */
  userVerified?: boolean;
}

export class SoftAuthenticator {
  readonly credentials = new Map<string, SoftCredential>();

  /** Answers creation options: a new discoverable ES256 credential. */
  create(options: Json, c: Ceremony & { counter?: number }): Json {
    const rp = options.rp as { id?: string };
    const user = options.user as { id: string };
    const rpId = c.rpId ?? rp.id ?? new URL(c.origin).hostname;
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const id = b64url(sha256(`${Math.random()}${Date.now()}`).subarray(0, 16));
    const cred = { id, rpId, userHandle: user.id, privateKey, publicKey, counter: c.counter ?? 0 };
    this.credentials.set(id, cred);
    return this.attest(cred, options, c);
  }

  /**
   * Answers creation options with a credential it holds already (its id and key): what an
   * authenticator that ignored `excludeCredentials` would send.
   */
  createAgain(credentialId: string, options: Json, c: Ceremony): Json {
    const cred = this.credentials.get(credentialId);
    if (cred === undefined) throw new Error(`no credential ${credentialId}`);
    return this.attest(cred, options, c);
  }

  /** A registration answer for `cred`, attestation "none". */
  private attest(cred: SoftCredential, options: Json, c: Ceremony): Json {
    const idBytes = Buffer.from(cred.id, "base64url");
    const jwk = cred.publicKey.export({ format: "jwk" });
    const cose = new Map<number, unknown>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, Buffer.from(jwk.x ?? "", "base64url")],
      [-3, Buffer.from(jwk.y ?? "", "base64url")],
    ]);
    const credIdLength = Buffer.alloc(2);
    credIdLength.writeUInt16BE(idBytes.length);
    const authData = Buffer.concat([
      this.prefix(c.rpId ?? cred.rpId, UP | AT | (c.userVerified === false ? 0 : UV), cred.counter),
      Buffer.alloc(16),
      credIdLength,
      idBytes,
      cbor(cose),
    ]);
    const clientData = JSON.stringify({
      type: "webauthn.create",
      challenge: options.challenge,
      origin: c.origin,
      crossOrigin: false,
    });
    return {
      id: cred.id,
      rawId: cred.id,
      type: "public-key",
      response: {
        clientDataJSON: b64url(clientData),
        attestationObject: b64url(cbor({ fmt: "none", attStmt: {}, authData })),
        transports: ["internal"],
      },
      clientExtensionResults: {},
      authenticatorAttachment: "platform",
    };
  }

  /**
   * Answers request options with `credentialId` (default: the only credential, or the first the
   * options allow); the counter moves up by one unless `counter` says what to send.
   */
  get(options: Json, c: Ceremony & { credentialId?: string; counter?: number; userHandle?: string }): Json {
    const allowed = ((options.allowCredentials as { id: string }[] | undefined) ?? []).map((a) => a.id);
    const id =
      c.credentialId ?? allowed.find((a) => this.credentials.has(a)) ?? [...this.credentials.keys()][0];
    const cred = id === undefined ? undefined : this.credentials.get(id);
    if (cred === undefined) throw new Error("no credential to answer with");
    cred.counter = c.counter ?? cred.counter + 1;
    const authData = this.prefix(c.rpId ?? cred.rpId, UP | (c.userVerified === false ? 0 : UV), cred.counter);
    const clientData = Buffer.from(
      JSON.stringify({
        type: "webauthn.get",
        challenge: options.challenge,
        origin: c.origin,
        crossOrigin: false,
      }),
    );
    const signature = sign("sha256", Buffer.concat([authData, sha256(clientData)]), cred.privateKey);
    return {
      id: cred.id,
      rawId: cred.id,
      type: "public-key",
      response: {
        clientDataJSON: b64url(clientData),
        authenticatorData: b64url(authData),
        signature: b64url(signature),
        userHandle: c.userHandle ?? cred.userHandle,
      },
      clientExtensionResults: {},
      authenticatorAttachment: "platform",
    };
  }

  private prefix(rpId: string, flags: number, counter: number): Buffer {
    const count = Buffer.alloc(4);
    count.writeUInt32BE(counter);
    return Buffer.concat([sha256(rpId), Buffer.from([flags]), count]);
  }
}
