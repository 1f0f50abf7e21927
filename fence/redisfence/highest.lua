-- KEYS[1] fence key. Reads the mark without registering anything.
return redis.call('GET', KEYS[1])
