/**
 * The WebAuthn ceremonies, by @simplewebauthn/server: the options a browser takes, the shapes of
 * the credentials it answers with (checked before anything is read or written), and their
 * verification against an app's relying party.
 */
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type AuthenticatorTransport,
  type RegistrationResponseJSON,
} from "@simplewebauthn/server";
import { z } from "zod";
import { badField, clip } from "../errors.js";
import { errorMessage } from "../log.js";
import type { RelyingParty } from "./relying-party.js";
import { CHALLENGE_TTL_MS, type Passkey } from "./store.js";

/** ES256, EdDSA, RS256: what authenticators make, in the order WebAuthn advises. */
const ALGORITHMS = [-7, -8, -257];

/** Longer than any credential id (WebAuthn: at most 1023 bytes) or authenticator answer field. */
const B64URL = z
  .string({ error: "must be a base64url string" })
  .min(1, "must not be empty")
  .max(16_384, "is too long")
  .regex(/^[A-Za-z0-9_-]+$/, "must be base64url (no padding)");

const TRANSPORTS = ["ble", "cable", "hybrid", "internal", "nfc", "smart-card", "usb"] as const;

const common = {
  id: B64URL.max(1_400, "is too long"),
  rawId: B64URL.max(1_400, "is too long"),
  type: z.literal("public-key", { error: 'must be "public-key"' }),
  clientExtensionResults: z.record(z.string(), z.unknown()).optional(),
  authenticatorAttachment: z.enum(["platform", "cross-platform"]).optional(),
};

const RegistrationShape = z.object({
  ...common,
  response: z.object({
    clientDataJSON: B64URL,
    attestationObject: B64URL,
    authenticatorData: B64URL.optional(),
    publicKey: B64URL.optional(),
    publicKeyAlgorithm: z.number().int().optional(),
    // Unknown transports are dropped, not refused: browsers add new ones.
    transports: z.array(z.string().max(32)).max(16).optional(),
  }),
});

const AssertionShape = z.object({
  ...common,
  response: z.object({
    clientDataJSON: B64URL,
    authenticatorData: B64URL,
    signature: B64URL,
    userHandle: B64URL.optional(),
  }),
});

/** The first problem of a credential's shape, named as the caller wrote it (`credential.response.signature`). */
function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  if (value === undefined || value === null) throw badField("credential", "is required");
  const parsed = schema.safeParse(value);
  if (parsed.success) {
    if ((parsed.data as { id: string; rawId: string }).id !== (parsed.data as { rawId: string }).rawId) {
      throw badField("credential.rawId", "must equal credential.id");
    }
    return parsed.data;
  }
  const issue = parsed.error.issues[0];
  const field = ["credential", ...(issue?.path ?? []).map(String)].join(".");
  return badFieldThrow(field, issue?.message ?? "is invalid");
}

function badFieldThrow(field: string, message: string): never {
  throw badField(field, message);
}

export function readRegistration(value: unknown): RegistrationResponseJSON {
  const r = parse(RegistrationShape, value);
  return {
    ...r,
    clientExtensionResults: r.clientExtensionResults ?? {},
    response: { ...r.response, transports: knownTransports(r.response.transports) },
  };
}

export function readAssertion(value: unknown): AuthenticationResponseJSON {
  const r = parse(AssertionShape, value);
  return { ...r, clientExtensionResults: r.clientExtensionResults ?? {} };
}

function knownTransports(list: readonly string[] | undefined): AuthenticatorTransport[] {
  return (list ?? []).filter((t): t is AuthenticatorTransport =>
    (TRANSPORTS as readonly string[]).includes(t),
  );
}

/** The options of a registration: a discoverable credential, user verification preferred, no attestation. */
export async function creationOptions(
  rp: RelyingParty,
  appName: string,
  user: { userId: string; name: string },
  exclude: readonly Passkey[],
): Promise<Record<string, unknown>> {
  const options = await generateRegistrationOptions({
    rpName: appName,
    rpID: rp.rpId,
    userID: new TextEncoder().encode(user.userId),
    userName: user.name,
    userDisplayName: user.name,
    timeout: CHALLENGE_TTL_MS,
    attestationType: "none",
    excludeCredentials: exclude.map((p) => ({ id: p.id, transports: knownTransports(p.transports) })),
    authenticatorSelection: { residentKey: "required", userVerification: "preferred" },
    supportedAlgorithmIDs: ALGORITHMS,
  });
  return options as unknown as Record<string, unknown>;
}

/** The options of an assertion: any discoverable credential, or one of `allow` (a step-up's). */
export async function requestOptions(
  rp: RelyingParty,
  allow: readonly Passkey[] = [],
): Promise<Record<string, unknown> & { challenge: string }> {
  const options = await generateAuthenticationOptions({
    rpID: rp.rpId,
    timeout: CHALLENGE_TTL_MS,
    userVerification: "preferred",
    // None for a login: any discoverable credential of the RP ID answers.
    ...(allow.length === 0
      ? {}
      : { allowCredentials: allow.map((p) => ({ id: p.id, transports: knownTransports(p.transports) })) }),
  });
  return options as unknown as Record<string, unknown> & { challenge: string };
}

/** A verified registration: the credential to keep. */
export interface NewCredential {
  id: string;
  publicKey: string;
  counter: number;
  transports: string[];
}

/**
 * Verifies a registration against the challenge and the relying party; a failure is a 400
 * naming `credential` with the library's reason (the caller's own browser made it).
 */
export async function verifyRegistration(
  response: RegistrationResponseJSON,
  challenge: string,
  rp: RelyingParty,
): Promise<NewCredential> {
  let verified;
  try {
    verified = await verifyRegistrationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: rp.origins,
      expectedRPID: rp.rpId,
      requireUserVerification: false,
    });
  } catch (err) {
    throw badField("credential", clip(errorMessage(err), 160));
  }
  const info = verified.registrationInfo;
  if (!verified.verified || info === undefined)
    throw badField("credential", "the registration did not verify");
  // The id kept is the authenticator's own: a JSON id naming another credential is refused.
  if (info.credential.id !== response.id) {
    throw badField("credential.id", "is not the id of the credential the authenticator made");
  }
  return {
    id: info.credential.id,
    publicKey: Buffer.from(info.credential.publicKey).toString("base64url"),
    counter: info.credential.counter,
    transports: knownTransports(response.response.transports),
  };
}

/**
 * Verifies an assertion's origin, RP ID, challenge and signature against the stored passkey;
 * the counter is left to the caller, which moves it atomically (PasskeyStore.use). Returns the
 * counter sent and whether the user was verified, or the reason it failed.
 */
export async function verifyAssertion(
  response: AuthenticationResponseJSON,
  challenge: string,
  rp: RelyingParty,
  passkey: Passkey,
): Promise<{ ok: true; counter: number; userVerified: boolean } | { ok: false; reason: string }> {
  try {
    const verified = await verifyAuthenticationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: rp.origins,
      expectedRPID: rp.rpId,
      requireUserVerification: false,
      // 0: the library does not compare counters; PasskeyStore.use does, atomically.
      credential: {
        id: passkey.id,
        publicKey: Buffer.from(passkey.publicKey, "base64url"),
        counter: 0,
        transports: knownTransports(passkey.transports),
      },
    });
    if (!verified.verified) return { ok: false, reason: "the signature did not verify" };
    const info = verified.authenticationInfo;
    return { ok: true, counter: info.newCounter, userVerified: info.userVerified };
  } catch (err) {
    return { ok: false, reason: clip(errorMessage(err), 160) };
  }
}
