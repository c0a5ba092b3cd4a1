/**
 * Email addresses as every domain takes them: a recipient (`isEmailAddress`) and a sender, bare or
 * with a display name (`isMailbox`, `mailboxAddress`). Settings check EMAIL_FROM with these, the
 * session service its identifiers, the email providers their recipients.
 */

/** Characters of an unquoted local part (RFC 5321 `Dot-string`: atext and dots). */
const LOCAL_PART = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
/** A domain label: letters (internationalized ones too), digits and inner hyphens, up to 63 characters. */
const LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}-]{0,61}[\p{L}\p{M}\p{N}])?$/u;

/**
 * A pragmatic check of an address as we accept it for sending (RFC 5321 `Mailbox`, without quoted
 * local parts or address literals): one `@`, a dot-string local part of at most 64 characters, a
 * domain of at least two labels whose last one is not all digits, at most 254 characters in all,
 * and no spaces or control characters anywhere.
 */
export function isEmailAddress(v: string): boolean {
  if (v.length > 254 || /[\s\p{Cc}]/u.test(v)) return false;
  const at = v.indexOf("@");
  if (at < 1 || at !== v.lastIndexOf("@")) return false;
  const local = v.slice(0, at);
  const domain = v.slice(at + 1);
  if (local.length > 64 || !LOCAL_PART.test(local)) return false;
  const labels = domain.split(".");
  if (labels.length < 2 || !labels.every((label) => LABEL.test(label))) return false;
  return !/^\d+$/.test(labels[labels.length - 1] ?? "");
}

/**
 * The address of a sender as EMAIL_FROM gives it: a bare address, or `Display Name <address>`;
 * undefined when it is neither (display names with `<`, `>`, `"` or control characters included).
 */
export function mailboxAddress(v: string): string | undefined {
  const named = /^([^<>"\p{Cc}]*)<([^<>]+)>$/u.exec(v);
  const address = named === null ? v : (named[2] ?? "");
  return isEmailAddress(address) ? address : undefined;
}

/** A sender as EMAIL_FROM may give it: `noreply@example.com` or `Example <noreply@example.com>`. */
export function isMailbox(v: string): boolean {
  return mailboxAddress(v) !== undefined;
}
