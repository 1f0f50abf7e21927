-- KEYS[1] record. Returns the record, or nil.
return record(KEYS[1])
