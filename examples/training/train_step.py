import torch
from torch import nn

model = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 10)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
static_x = torch.randn(32, 128, device="cuda")
static_y = torch.randint(0, 10, (32,), device="cuda")
side = torch.cuda.Stream()
metrics = torch.zeros(1, device="cuda")


def step():
    optimizer.zero_grad(set_to_none=True)
    out = model(static_x)
    loss = criterion(out, static_y)
    loss.backward()
    optimizer.step()
    return loss


warm = torch.cuda.Stream()
warm.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(warm):
    for _ in range(3):
        step()
torch.cuda.current_stream().wait_stream(warm)

graph = torch.cuda.CUDAGraph()
with torch.autocast("cuda", dtype=torch.bfloat16):
    with torch.cuda.graph(graph):
        static_loss = step()
        with torch.cuda.stream(side):
            metrics += static_loss.detach()
