/**
 * GSM 03.38 (3GPP TS 23.038) default alphabet: what a single SMS can carry without switching to UCS2.
 * Index in the string is the septet value; 0x1B is the escape to the extension table, not a character.
 */
const BASIC =
  "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\u001bÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?" +
  "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
/** Extension-table characters: each costs two septets (escape + code). */
const EXTENSION = "\f^{}\\[~]|€";

// Both tables hold single-code-unit characters only, so Array.from splits them exactly.
const basic = new Set(Array.from(BASIC).filter((c) => c !== "\u001b"));
const extension = new Set(Array.from(EXTENSION));

/** True when every character of `text` is in the GSM 7-bit default alphabet or its extension table. */
export function isGsm7(text: string): boolean {
  for (const c of text) if (!basic.has(c) && !extension.has(c)) return false;
  return true;
}

export interface SmsEncoding {
  /** `gsm7` (data_coding 0, the SMSC default alphabet) or `ucs2` (data_coding 8, UTF-16BE). */
  encoding: "gsm7" | "ucs2";
  /** Septets for GSM-7, UTF-16 code units for UCS2. */
  units: number;
  /** Units that fit in one SMS of 140 octets: 160 septets or 70 UCS2 characters. */
  singleSmsUnits: 160 | 70;
}

/** How `text` travels: GSM-7 when it can, UCS2 otherwise, and its size in that encoding. */
export function smsEncoding(text: string): SmsEncoding {
  if (!isGsm7(text)) return { encoding: "ucs2", units: text.length, singleSmsUnits: 70 };
  let units = 0;
  for (const c of text) units += extension.has(c) ? 2 : 1;
  return { encoding: "gsm7", units, singleSmsUnits: 160 };
}

/** True when `text` fits in one SMS (140 octets), which the Android SMS Retriever requires. */
export function fitsOneSms(text: string): boolean {
  const e = smsEncoding(text);
  return e.units <= e.singleSmsUnits;
}
