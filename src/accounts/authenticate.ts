import { RingfenceError } from "../errors.js";
import type { Secrets } from "../crypto/secrets.js";
import { callerOf, type Authenticator, type CallContext } from "../rpc/binding.js";
import { callerKey } from "../rpc/callers.js";
import { UUID, type StoredAccount } from "./account.js";
import { API_KEY_PURPOSE, type AccountReader } from "./store.js";

const UNKNOWN_HASH = "0".repeat(64);

/**
 * Authenticates a V1 caller: the `x-api-key` must be the key of the account named by the
 * customer uuid. Unknown customer and wrong key give the same answer, so neither can be probed.
 */
async function authenticateCustomer(
  store: AccountReader,
  secrets: Secrets,
  customerUuid: string | undefined,
  ctx: CallContext,
): Promise<StoredAccount> {
  const apiKey = ctx.header("x-api-key");
  if (apiKey === undefined || apiKey === "") {
    throw new RingfenceError("account_invalid", "the x-api-key header is required");
  }
  if (customerUuid === undefined || customerUuid === "") {
    throw new RingfenceError("account_invalid", "the customer uuid is required");
  }
  const account = UUID.safeParse(customerUuid).success
    ? await store.get(customerUuid.toLowerCase())
    : undefined;
  // An unknown customer still costs one hash comparison, so timing does not tell which it was.
  const matches = secrets.matches(API_KEY_PURPOSE, apiKey, account?.apiKeyHash ?? UNKNOWN_HASH);
  if (account === undefined || !matches) {
    throw new RingfenceError("account_invalid", "unknown customer, or the API key is not this customer's");
  }
  if (account.status === "suspended") {
    throw new RingfenceError("suspended_account", "this account is suspended");
  }
  return account;
}

/**
 * Authenticates a V1 caller by its `x-api-key` alone (the original API's read-back). A
 * `customer-uuid` header, when sent, must name the key's account.
 */
async function authenticateByKey(
  store: AccountReader,
  secrets: Secrets,
  ctx: CallContext,
): Promise<StoredAccount> {
  const apiKey = ctx.header("x-api-key");
  if (apiKey === undefined || apiKey === "") {
    throw new RingfenceError("account_invalid", "the x-api-key header is required");
  }
  const named = ctx.header("customer-uuid");
  if (named !== undefined && named !== "") return authenticateCustomer(store, secrets, named, ctx);
  const account = await store.findByApiKey(apiKey);
  if (account === undefined) throw new RingfenceError("account_invalid", "unknown API key");
  if (account.status === "suspended") {
    throw new RingfenceError("suspended_account", "this account is suspended");
  }
  return account;
}

/** The V1 authenticator of calls that name their customer (`customerUuidOf`): see authenticateCustomer. */
export function customerAuthenticator(
  store: AccountReader,
  secrets: Secrets,
  customerUuidOf: (request: unknown, ctx: CallContext) => string | undefined,
): Authenticator<StoredAccount> {
  return (ctx, request) => authenticateCustomer(store, secrets, customerUuidOf(request, ctx), ctx);
}

/** The V1 authenticator of the read-back: the API key alone (see authenticateByKey). */
export function apiKeyAuthenticator(store: AccountReader, secrets: Secrets): Authenticator<StoredAccount> {
  return (ctx) => authenticateByKey(store, secrets, ctx);
}

/**
 * Authenticates a V2 caller by `authorization: Bearer <api key>` (docs/v2-api.md#authentication):
 * the key alone finds the account. A missing, malformed or unknown key is `invalid_api_key`.
 */
export function bearerKeyAuthenticator(store: AccountReader): Authenticator<StoredAccount> {
  return async (ctx) => {
    const header = ctx.header("authorization") ?? "";
    const m = /^Bearer ([\x21-\x7e]+)$/i.exec(header.trim());
    if (m?.[1] === undefined) {
      throw new RingfenceError("invalid_api_key", "send the API key as authorization: Bearer <api key>", {
        "www-authenticate": "Bearer",
      });
    }
    const account = await store.findByApiKey(m[1]);
    if (account === undefined) {
      throw new RingfenceError("invalid_api_key", "unknown API key", { "www-authenticate": "Bearer" });
    }
    if (account.status === "suspended") {
      throw new RingfenceError("suspended_account", "this account is suspended");
    }
    return account;
  };
}

/** The customer uuid of a V1 request body (`customer_uuid`). */
export function bodyCustomerUuid(request: unknown): string | undefined {
  const uuid = (request as { customerUuid?: unknown } | null)?.customerUuid;
  return typeof uuid === "string" ? uuid : undefined;
}

/** The key an account is found under on a call's context: logged by its customer uuid. */
export const ACCOUNT_CALLER = callerKey<StoredAccount>("account", (a) => `customer:${a.customerUuid}`);

/** The account of a V1 or V2 call (put on the context by one of the accounts module's chains). */
export function accountOf(ctx: CallContext): StoredAccount {
  return callerOf(ctx, ACCOUNT_CALLER);
}
