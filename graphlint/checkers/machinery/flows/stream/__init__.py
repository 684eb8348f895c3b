"""The stream flow: which stream uses which tensor and what orders them, the device memory the
local names hold, and what a function does to streams for its callers."""
