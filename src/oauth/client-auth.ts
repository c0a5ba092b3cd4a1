import { RingfenceError } from "../errors.js";
import type { CallContext } from "../rpc/binding.js";
import type { AuthenticatedClient, ClientStore } from "./clients.js";
import type { TokenFailures } from "./failures.js";

/** Where client authentication looks, and where its failures are counted. */
export interface ClientAuthDeps {
  clients: ClientStore;
  /** Failed client authentications per client_id and per client address (429 past them). */
  failures: TokenFailures;
}

/** The client's credentials as the request gave them (RFC 6749 section 2.3.1). */
export interface ClientCredentials {
  clientId: string | undefined;
  secret: string | undefined;
  /** Whether they came in HTTP Basic: a failure then answers with a Basic challenge. */
  basic: boolean;
}

const CHALLENGE = { "www-authenticate": 'Basic realm="ringfence"' };

/**
 * The credentials of a token request: HTTP Basic or client_id/client_secret in the form, never
 * both. A malformed Basic header is invalid_client at once.
 */
export function readCredentials(ctx: CallContext, form: Map<string, string>): ClientCredentials {
  const basic = readBasic(ctx.header("authorization"));
  if (basic !== undefined && (form.has("client_id") || form.has("client_secret"))) {
    throw new RingfenceError(
      "invalid_request",
      "use HTTP Basic or client_id/client_secret in the body, not both",
    );
  }
  if (basic !== undefined) return { ...basic, basic: true };
  return { clientId: form.get("client_id"), secret: form.get("client_secret"), basic: false };
}

/**
 * Authenticates the client: its stored secret hash against the one given. A failure (no
 * credentials, an unknown client, a wrong secret) is counted in the failure windows and answered
 * 401 invalid_client, or 429 once a window is full; a success is counted nowhere.
 */
export async function authenticateClient(
  deps: ClientAuthDeps,
  credentials: ClientCredentials,
  ctx: CallContext,
): Promise<AuthenticatedClient> {
  const { clientId, secret } = credentials;
  const authenticated =
    clientId === undefined || secret === undefined
      ? undefined
      : await deps.clients.authenticate(clientId, secret);
  if (authenticated !== undefined) return authenticated;
  throw await clientAuthFailed(deps, credentials, ctx);
}

/** Counts a failed authentication; the error to answer it with. */
export async function clientAuthFailed(
  deps: ClientAuthDeps,
  credentials: ClientCredentials,
  ctx: CallContext,
): Promise<RingfenceError> {
  const refusal = await deps.failures.failed(credentials.clientId, ctx.clientAddress);
  return (
    refusal ??
    new RingfenceError(
      "invalid_client",
      "client authentication failed",
      credentials.basic ? { ...CHALLENGE } : {},
    )
  );
}

/** RFC 6749 section 2.3.1: Basic with the form-urlencoded client_id and secret. */
function readBasic(header: string | undefined): { clientId: string; secret: string } | undefined {
  if (header === undefined) return undefined;
  const match = /^Basic\s+([A-Za-z0-9+/=._~-]+)\s*$/i.exec(header);
  if (match?.[1] === undefined) {
    throw new RingfenceError("invalid_client", "the Authorization header is not HTTP Basic", {
      ...CHALLENGE,
    });
  }
  const decoded = Buffer.from(match[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0)
    throw new RingfenceError("invalid_client", "malformed HTTP Basic credentials", { ...CHALLENGE });
  try {
    const decode = (s: string) => decodeURIComponent(s.replace(/\+/g, " "));
    return { clientId: decode(decoded.slice(0, colon)), secret: decode(decoded.slice(colon + 1)) };
  } catch {
    throw new RingfenceError("invalid_client", "malformed HTTP Basic credentials", { ...CHALLENGE });
  }
}
