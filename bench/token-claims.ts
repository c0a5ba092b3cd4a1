import { randomUUID } from "node:crypto";
import { SignJWT, type CryptoKey } from "jose";

/** What the floors need to sign a token like ours: an ES256 key with its kid, and the issuer. */
export interface Signer {
  key: CryptoKey;
  kid: string;
  issuer: string;
}

/**
 * An access token with the claims and header of ours (docs/session-guide.md#get-a-server-token): the work a
 * floor does per call, and nothing else.
 */
export function signToken(s: Signer, clientId: string, scope: string): Promise<string> {
  const iat = Math.floor(Date.now() / 1000);
  return new SignJWT({ scope, app_id: "app_bench" })
    .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: s.kid })
    .setIssuer(s.issuer)
    .setSubject(clientId)
    .setAudience("app_bench")
    .setIssuedAt(iat)
    .setExpirationTime(iat + 3600)
    .setJti(randomUUID())
    .sign(s.key);
}

/** The client id and secret of an `Authorization: Basic` header, or undefined. */
export function readBasic(header: string | undefined): { id: string; secret: string } | undefined {
  const m = /^Basic\s+(\S+)$/i.exec(header ?? "");
  if (m?.[1] === undefined) return undefined;
  const decoded = Buffer.from(m[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) return undefined;
  return {
    id: decodeURIComponent(decoded.slice(0, colon)),
    secret: decodeURIComponent(decoded.slice(colon + 1)),
  };
}

/** The credentials every reference accepts, and the scope to grant. */
export interface ReferenceArgs {
  clientId: string;
  clientSecret: string;
  scope: string;
}
