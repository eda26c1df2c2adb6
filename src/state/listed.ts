/** What a listing of state files found: the items it could read, and a warning for each it could not. */
export interface Listed<T> {
  items: T[];
  warnings: string[];
}
