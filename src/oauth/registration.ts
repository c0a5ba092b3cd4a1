import { badField } from "../errors.js";
import type { OutboundGuard } from "../net/outbound.js";
import { MAX_URL_LENGTH, parseHttpUrl } from "../net/validate.js";
import { publicJwks, type PublicJwks } from "./client-keys.js";
import { TOKEN_ENDPOINT_AUTH_METHODS, type TokenEndpointAuthMethod } from "./metadata.js";

/** How a client being registered authenticates, as CreateClient gives it. */
export interface AuthMethodInput {
  tokenEndpointAuthMethod: string;
  jwks: Record<string, unknown> | undefined;
  jwksUri: string;
}

export interface ClientAuthMethod {
  /** The method the registration named; undefined when it named none: either secret method. */
  authMethod: TokenEndpointAuthMethod | undefined;
  jwks?: PublicJwks;
  jwksUri?: string;
}

/**
 * The registered way to authenticate: none named (either secret method, answered as
 * `client_secret_basic`), or the one method named; a `private_key_jwt` client with its public
 * keys inline (`jwks`) or at a URL (`jwks_uri`: https, or http to an address
 * OUTBOUND_ALLOWED_CIDRS lists, and never to a refused address); a secret client with neither.
 * Refusals are 400 bad_request naming the field.
 */
export async function clientAuthMethod(
  input: AuthMethodInput,
  outbound: Pick<OutboundGuard, "checkUrl" | "listed">,
): Promise<ClientAuthMethod> {
  const method = input.tokenEndpointAuthMethod;
  if (method !== "" && !(TOKEN_ENDPOINT_AUTH_METHODS as readonly string[]).includes(method)) {
    throw badField("token_endpoint_auth_method", `must be one of ${TOKEN_ENDPOINT_AUTH_METHODS.join(", ")}`);
  }
  const authMethod = method === "" ? undefined : (method as TokenEndpointAuthMethod);
  const hasJwks = input.jwks !== undefined;
  const hasUri = input.jwksUri !== "";
  if (authMethod !== "private_key_jwt") {
    if (hasJwks) throw badField("jwks", "is only for private_key_jwt clients");
    if (hasUri) throw badField("jwks_uri", "is only for private_key_jwt clients");
    return { authMethod };
  }
  if (hasJwks && hasUri) throw badField("jwks_uri", "must not be given with jwks: register one of them");
  if (hasJwks) return { authMethod, jwks: await publicJwks(input.jwks) };
  if (!hasUri) throw badField("jwks", "is required for private_key_jwt, or jwks_uri");
  await checkJwksUri(input.jwksUri, outbound);
  return { authMethod, jwksUri: input.jwksUri };
}

async function checkJwksUri(
  raw: string,
  outbound: Pick<OutboundGuard, "checkUrl" | "listed">,
): Promise<void> {
  if (raw.length > MAX_URL_LENGTH) throw badField("jwks_uri", `must be at most ${MAX_URL_LENGTH} characters`);
  const url = parseHttpUrl(raw);
  if (url === undefined) throw badField("jwks_uri", "must be an https URL");
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (url.protocol !== "https:" && !outbound.listed(host)) {
    throw badField("jwks_uri", "must be an https URL (http only to an address OUTBOUND_ALLOWED_CIDRS lists)");
  }
  await outbound.checkUrl(raw, "jwks_uri");
}
