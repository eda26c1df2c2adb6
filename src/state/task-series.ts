import { randomBytes } from "node:crypto";

/** Crockford's base32 alphabet in lower case: no i, l, o or u to misread. */
const SERIES_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

/** 5 crypto-random characters (25 bits): two lost boards of one team share a series about once in 33 million. */
export function newTaskSeries(): string {
  return Array.from(randomBytes(5), (byte) => SERIES_ALPHABET[byte % 32]).join("");
}
