-- Registers the token without touching any data.
advance()
return {1}
