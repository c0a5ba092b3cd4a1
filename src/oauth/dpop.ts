import {
  calculateJwkThumbprint,
  decodeProtectedHeader,
  EmbeddedJWK,
  jwtVerify,
  type JWK,
  type ProtectedHeaderParameters,
} from "jose";
import { refusedBy, RingfenceError } from "../errors.js";
import type { Keys, RedisClient } from "../redis/client.js";
import { OAuthKeys } from "./keys.js";
import { DPOP_ALGORITHMS } from "./metadata.js";

export interface DpopOptions {
  redis: RedisClient;
  keys: Keys;
  /** The URL proofs must name in `htu`: the token endpoint's, as clients reach it. */
  htu: string;
  /** How far a proof's `iat` may be from now, either way (DPOP_PROOF_MAX_AGE_SECONDS). */
  maxAgeSeconds: number;
  now?: () => number;
}

/** A proof that passed every check but its single use. */
export interface CheckedProof {
  /** RFC 7638 thumbprint (SHA-256) of the proof's key: the token's `cnf.jkt`. */
  jkt: string;
  jti: string;
}

/** A DPoP proof is a few hundred bytes (an RSA key's a little more); anything this long is not one. */
const MAX_PROOF_CHARS = 8_192;
const MAX_JTI_CHARS = 256;

/**
 * DPoP proofs at the token endpoint (RFC 9449 section 4.3): a JWT with `typ: dpop+jwt`, signed
 * by the public key in its `jwk` header with an asymmetric algorithm, naming this endpoint's
 * method (`htm`) and URL (`htu`, compared without query and fragment), issued (`iat`) within
 * DPOP_PROOF_MAX_AGE_SECONDS of now, and whose `jti` is used once: a Redis key per key and jti
 * (`dpop:{<jkt>}:<digest>`, SET NX) kept twice that long, past which its `iat` is out of reach.
 * Refusals are 400 `invalid_dpop_proof` (section 5).
 */
export class DpopProofs {
  private readonly htu: string;
  private readonly keys: OAuthKeys;

  constructor(private readonly opts: DpopOptions) {
    this.htu = withoutQuery(opts.htu) ?? opts.htu;
    this.keys = new OAuthKeys(opts.keys);
  }

  /** Every check of the proof but its single use; no Redis work. */
  async check(proof: string, htm: string): Promise<CheckedProof> {
    if (proof.length > MAX_PROOF_CHARS || !/^[\w-]+\.[\w-]+\.[\w-]+$/.test(proof)) {
      throw invalidProof("the DPoP header must hold one proof, a compact JWS");
    }
    let header: ProtectedHeaderParameters;
    try {
      header = decodeProtectedHeader(proof);
    } catch {
      throw invalidProof("the proof's header is not readable");
    }
    if (header.typ !== "dpop+jwt") throw invalidProof('the proof\'s typ must be "dpop+jwt"');
    if (typeof header.alg !== "string" || !(DPOP_ALGORITHMS as readonly string[]).includes(header.alg)) {
      throw invalidProof(`the proof's alg must be one of ${DPOP_ALGORITHMS.join(", ")}`);
    }
    const jwk = header.jwk;
    if (typeof jwk !== "object" || (jwk as JWK | null) === null) {
      throw invalidProof("the proof's header must carry its public key in jwk");
    }
    let payload: Record<string, unknown>;
    try {
      // EmbeddedJWK refuses a private key in the header; jose refuses RSA keys under 2048 bits.
      ({ payload } = await jwtVerify(proof, EmbeddedJWK, {
        algorithms: [header.alg],
        typ: "dpop+jwt",
      }));
    } catch {
      throw invalidProof("the proof's signature does not verify with its jwk");
    }
    if (payload.htm !== htm) throw invalidProof(`the proof's htm must be ${htm}`);
    if (typeof payload.htu !== "string" || withoutQuery(payload.htu) !== this.htu) {
      throw invalidProof(`the proof's htu must be ${this.htu}`);
    }
    const now = (this.opts.now ?? Date.now)() / 1000;
    if (typeof payload.iat !== "number" || !Number.isFinite(payload.iat)) {
      throw invalidProof("the proof must carry iat");
    }
    if (Math.abs(now - payload.iat) > this.opts.maxAgeSeconds) {
      throw refusedBy(
        "DPOP_PROOF_MAX_AGE_SECONDS",
        invalidProof(`the proof's iat must be within ${this.opts.maxAgeSeconds} seconds of now`),
      );
    }
    const jti = payload.jti;
    if (typeof jti !== "string" || jti === "" || jti.length > MAX_JTI_CHARS) {
      throw invalidProof(`the proof must carry a jti of 1 to ${MAX_JTI_CHARS} characters`);
    }
    return { jkt: await calculateJwkThumbprint(jwk, "sha256"), jti };
  }

  /** Marks the proof used; a proof used already is refused (one Redis command). */
  async spend(proof: CheckedProof): Promise<void> {
    const key = this.keys.dpopProofUse(proof.jkt, proof.jti);
    const set = await this.opts.redis.set(key, "1", "PX", 2 * this.opts.maxAgeSeconds * 1000, "NX");
    if (set === null) {
      throw refusedBy("DPOP_PROOF_MAX_AGE_SECONDS", invalidProof("the proof's jti was used already"));
    }
  }
}

/** The URL without query and fragment, normalized (RFC 9449 section 4.3 point 9), or undefined. */
function withoutQuery(raw: string): string | undefined {
  if (!URL.canParse(raw)) return undefined;
  const url = new URL(raw);
  url.search = "";
  url.hash = "";
  return url.href;
}

function invalidProof(why: string): RingfenceError {
  return new RingfenceError("invalid_dpop_proof", why);
}
