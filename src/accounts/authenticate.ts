import { RingfenceError } from "../errors.js";
import type { Secrets } from "../crypto/secrets.js";
import type { CallContext } from "../rpc/binding.js";
import { UUID, type StoredAccount } from "./account.js";
import { API_KEY_PURPOSE, type AccountStore } from "./store.js";

const UNKNOWN_HASH = "0".repeat(64);

/**
 * Authenticates a V1 caller: the `x-api-key` must be the key of the account named by the
 * customer uuid. Unknown customer and wrong key give the same answer, so neither can be probed.
 */
export async function authenticateCustomer(
  store: AccountStore,
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
